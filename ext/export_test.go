package ext

// SetCheckpointStarted sets the function called when a closing connection
// starts its checkpoint of a large WAL.
func SetCheckpointStarted(f func()) { checkpointStarted = f }
