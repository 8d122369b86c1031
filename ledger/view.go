package ledger

import "context"

// View runs read with the ledger's own connection to the database file, for
// side tables that belong beside the ledger (such as sqlfuncs' cache of
// optimised noise distributions) and must be read outside the calling
// statement. read must only read; writes go through [Ledger.Charge]'s release
// callback, in the charge's transaction.
func (l *Ledger) View(ctx context.Context, read func(q Queryer) error) error {
	return read(l.db)
}
