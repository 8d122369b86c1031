package release

import (
	"os/exec"
	"strings"
	"testing"
)

// The mechanisms describe what they release with package mechanism and never
// import the accountant: planning a release and pricing it stay apart (the
// accountant is passed in where a plan needs a calibration).
func TestReleaseDoesNotImportAccountant(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to list release's imports: %v", err)
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/dpsql/dpsql/release/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 5 {
		t.Fatalf("go list -deps listed only %q", deps)
	}
	seen := false
	for _, p := range deps {
		if strings.HasPrefix(p, "github.com/dpsql/dpsql/accountant") {
			t.Errorf("package release (or one below it) imports %s", p)
		}
		seen = seen || p == "github.com/dpsql/dpsql/mechanism"
	}
	if !seen {
		t.Error("release no longer imports package mechanism: the test lists the wrong packages")
	}
}
