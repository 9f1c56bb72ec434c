package crash

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryGoroutineRecovers: no go statement (or time.AfterFunc, which
// runs its function in a goroutine of its own) in the plugin's code under
// pkg/ and cmd/: a goroutine is started with Go, so that a panic in it is an
// internal error on the error path of its caller, not the end of the process
// with exit 2. Tests and the test harness (internal/testcluster) are not the
// plugin and may start goroutines as they like.
func TestEveryGoroutineRecovers(t *testing.T) {
	fset := token.NewFileSet()
	for _, root := range []string{"../../pkg", "../../cmd"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					t.Errorf("%s: a go statement; start the goroutine with crash.Go", fset.Position(n.Pos()))
				case *ast.SelectorExpr:
					if x, ok := n.X.(*ast.Ident); ok && x.Name == "time" && n.Sel.Name == "AfterFunc" {
						t.Errorf("%s: time.AfterFunc runs its function in a goroutine that does not recover; use a timer and crash.Go", fset.Position(n.Pos()))
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
