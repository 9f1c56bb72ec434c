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

// TestEveryGoroutineRecovers: the plugin's code under pkg/ and cmd/ starts
// no goroutine but with Go, so that a panic in one is an internal error on
// the error path of its caller, not the end of the process with exit 2: no
// go statement, no sync.WaitGroup.Go or errgroup's Go. time.AfterFunc runs
// its function in a goroutine of its own too; it may only call a function
// value with its arguments (a context's cancel, say), which cannot panic.
// Tests and the test harness (internal/testcluster) are not the plugin and
// may start goroutines as they like.
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
				case *ast.CallExpr:
					sel, ok := n.Fun.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					x, _ := sel.X.(*ast.Ident)
					switch {
					case sel.Sel.Name == "Go" && (x == nil || x.Name != "crash"):
						t.Errorf("%s: a goroutine started with %s.Go; start it with crash.Go", fset.Position(n.Pos()), exprName(sel.X))
					case sel.Sel.Name == "AfterFunc" && x != nil && x.Name == "time" && len(n.Args) == 2 && !onlyCallsAFuncValue(n.Args[1]):
						t.Errorf("%s: time.AfterFunc with a function that may panic in a goroutine that does not recover; use a timer and crash.Go", fset.Position(n.Pos()))
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

// onlyCallsAFuncValue reports whether f is func() { name(args...) } with
// arguments that are names or literals.
func onlyCallsAFuncValue(f ast.Expr) bool {
	lit, ok := f.(*ast.FuncLit)
	if !ok || len(lit.Body.List) != 1 {
		return false
	}
	stmt, ok := lit.Body.List[0].(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := stmt.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	if _, ok := call.Fun.(*ast.Ident); !ok {
		return false
	}
	for _, a := range call.Args {
		switch a.(type) {
		case *ast.Ident, *ast.BasicLit:
		default:
			return false
		}
	}
	return true
}

func exprName(e ast.Expr) string {
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return "a value"
}
