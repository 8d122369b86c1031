package sqlite_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/dpsql/dpsql/"

// goList runs go list with args in dir and returns its output's fields.
func goList(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to list imports: %v", err)
	}
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s (in %s): %v", strings.Join(args, " "), dir, err)
	}
	return strings.Fields(string(out))
}

// The SQLite layer's import constraints (issue 27): the cgo SQL-function
// package (sqlfuncs), the C layer (internal/sqlite: protected mode's owner
// functions are registered by ext) and the driver that opens dpsql's own
// connections (ext, with the batch VFS) stay out of protected mode, the Beam module and the
// loadable extension dp0, whose connections are the host's; the Beam module
// imports only public packages of the main module, each with a package doc.
func TestImportConstraints(t *testing.T) {
	root := filepath.Join("..", "..")
	forbidden := map[string][]string{
		"./protect/...": {"sqlfuncs", "ext", "cmd/", "internal/sqlite"},
		"./cmd/dp0":     {"ext"},
	}
	for pkgs, bad := range forbidden {
		for _, p := range goList(t, root, "-deps", pkgs) {
			for _, b := range bad {
				if p == module+b || strings.HasPrefix(p, module+b+"/") || (strings.HasSuffix(b, "/") && strings.HasPrefix(p, module+b)) {
					t.Errorf("%s depends on %s", pkgs, p)
				}
			}
		}
	}
	beam := filepath.Join(root, "beam")
	deps := goList(t, beam, "-deps", "./...")
	for _, p := range deps {
		if p == module+"sqlfuncs" || p == module+"ext" {
			t.Errorf("the Beam module depends on %s", p)
		}
	}
	seen := map[string]bool{}
	for _, p := range goList(t, beam, "-f", `{{join .Imports " "}}`, "./...") {
		if !strings.HasPrefix(p, module) || strings.HasPrefix(p, module+"beam/") || seen[p] {
			continue
		}
		seen[p] = true
		if strings.Contains(p, "/internal/") || strings.HasPrefix(p, module+"internal/") {
			t.Errorf("the Beam module imports %s, an internal package of the main module", p)
			continue
		}
		out, err := exec.Command("go", "list", "-json=Doc", p).Output()
		var doc struct{ Doc string }
		if err != nil || json.Unmarshal(out, &doc) != nil || doc.Doc == "" {
			t.Errorf("%s, which the Beam module imports, has no package doc (%v)", p, err)
		}
	}
	if !seen[module+"vector"] {
		t.Errorf("the Beam module imports none of vector: the test lists the wrong packages (%v)", seen)
	}
}
