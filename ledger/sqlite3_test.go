package ledger

// The ledger's default driver, and the one the tests open files with.
import _ "github.com/mattn/go-sqlite3"
