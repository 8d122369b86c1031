package release

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// A normal build (no dpsql_testseed tag) of the packages that make releases
// has no exported constructor of seeded noise: fixing the seed makes a
// release reproducible and therefore not private. The check reads the files
// go/build selects for a default build of each package.
func TestNoSeededConstructorInNormalBuild(t *testing.T) {
	ctx := build.Default // no tags
	for _, dir := range []string{".", "avgmix", "dfs", "../sqlfuncs"} {
		pkg, err := ctx.ImportDir(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range pkg.GoFiles {
			path := filepath.Join(dir, f)
			file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range file.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if ok && fd.Name.IsExported() && strings.Contains(strings.ToLower(fd.Name.Name), "seed") {
					t.Errorf("%s: %s is compiled into normal builds; seeded constructors belong behind //go:build dpsql_testseed", path, fd.Name.Name)
				}
			}
		}
		for _, f := range pkg.IgnoredGoFiles {
			if strings.Contains(f, "seed") && !strings.HasSuffix(f, "_test.go") {
				t.Logf("%s/%s: built only with a tag", dir, f)
			}
		}
	}
}
