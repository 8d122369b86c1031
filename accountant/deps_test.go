package accountant

import (
	"os/exec"
	"strings"
	"testing"
)

// Pricing is pure computation: the accountant reads no database and never
// imports the ledger that stores what it prices (the ledger imports it).
func TestAccountantReadsNoDatabase(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to list accountant's imports: %v", err)
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/dpsql/dpsql/accountant/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	seen := false
	for _, p := range deps {
		if strings.HasPrefix(p, "database/sql") || strings.HasPrefix(p, "github.com/dpsql/dpsql/ledger") ||
			strings.Contains(p, "sqlite") {
			t.Errorf("package accountant (or one below it) imports %s", p)
		}
		seen = seen || p == "github.com/dpsql/dpsql/mechanism"
	}
	if !seen {
		t.Error("accountant no longer imports package mechanism: the test lists the wrong packages")
	}
}
