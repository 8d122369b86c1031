package ext_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDependOnLocalCheckout builds a program in a module of its own that
// depends on this checkout through a replace directive, as docs/embedding.md
// says to (the module is not published, so go get fails), and runs it. It
// needs no network: the proxy is off and go mod tidy takes the checksums from
// the module cache (the checksum database is off), where a user's go mod tidy
// would fetch them.
func TestDependOnLocalCheckout(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a module of its own (go mod tidy, go build)")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	const program = `package main

import (
	"fmt"
	"log"

	"github.com/dpsql/dpsql/ext"
)

func main() {
	db, err := ext.Open("hello.db")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	var v string
	if err := db.QueryRow("SELECT dp_version()").Scan(&v); err != nil {
		log.Fatal(err)
	}
	fmt.Println("dpsql", v)
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOPROXY=off", "GOSUMDB=off", "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
	for _, args := range [][]string{
		{"mod", "init", "example.com/hello"},
		{"mod", "edit", "-require=github.com/dpsql/dpsql@v0.0.0", "-replace=github.com/dpsql/dpsql=" + repo},
		{"mod", "tidy"},
		{"build", "-o", "hello", "."},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(gomod), "replace github.com/dpsql/dpsql => "+repo) {
		t.Errorf("go.mod lost its replace directive:\n%s", gomod)
	}
	cmd := exec.Command(filepath.Join(dir, "hello"))
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "dpsql ") {
		t.Fatalf("the program built against the checkout: %v\n%s", err, out)
	}
}
