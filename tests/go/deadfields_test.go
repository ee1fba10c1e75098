package sotest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// writeOnlyAllowed are the fields no product code reads, each with its reason.
var writeOnlyAllowed = map[string]string{
	"impl/eth/ethfuzz.Hdr": "a decoded frame header handed to the fuzz tests, which compare it whole",
}

// TestNoWriteOnlyFields: every field of a product struct is read somewhere in the product
// code, not only written (as ctx->magic was): Go structs of capi, impl, cuda and ib (a struct
// used as a map key is read by the map), and the engine's C objects (impl/engine/*.h), whose
// fields C reads with -> or . and Go with a selector. Fields are matched by name, not by type:
// a field counts as read where any struct's field of that name is (engCtx.magic, gone, hid
// behind engReg.magic, which engine.go reads).
func TestNoWriteOnlyFields(t *testing.T) {
	src := productSources(t, "capi", "impl", "cuda", "ib")
	fset := token.NewFileSet()
	type field struct{ pkg, typ, name, at string }
	var fields []field
	reads := map[string]bool{} // pkg.name (name alone when exported) -> read
	mapKeys := map[string]bool{}
	mapKey := regexp.MustCompile(`map\[\*?(\w+)\]`)
	for p, s := range src {
		if !strings.HasSuffix(p, ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, s, 0)
		if err != nil {
			t.Fatal(err)
		}
		pkg := filepath.ToSlash(filepath.Dir(p))
		key := func(name string) string {
			if ast.IsExported(name) {
				return name
			}
			return pkg + "." + name
		}
		for _, m := range mapKey.FindAllStringSubmatch(s, -1) {
			mapKeys[pkg+"."+m[1]] = true
		}
		written := map[ast.Expr]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.TypeSpec:
				if st, ok := x.Type.(*ast.StructType); ok {
					for _, fl := range st.Fields.List {
						for _, id := range fl.Names {
							if id.Name != "_" {
								fields = append(fields, field{pkg, x.Name.Name, id.Name, fset.Position(id.Pos()).String()})
							}
						}
					}
				}
			case *ast.AssignStmt:
				if x.Tok == token.ASSIGN {
					for _, l := range x.Lhs {
						written[l] = true
					}
				}
			case *ast.SelectorExpr:
				if !written[x] {
					reads[key(x.Sel.Name)] = true
				}
			}
			return true
		})
	}
	// the engine's C objects: a field is read where -> or . names it other than as an assignment's target
	cField := regexp.MustCompile(`(?m)^\s+[A-Za-z_][\w\s\*]*?\b(\w+)(\[[^\]]*\])?(\s+__attribute__\(\([^)]*\)\))?\s*;`)
	cStruct := regexp.MustCompile(`(?s)typedef struct (\w+) \{(.*?)\n\} \w+;`)
	var cSrc strings.Builder
	for _, s := range src {
		cSrc.WriteString(s)
	}
	cRead := cFieldsRead(cSrc.String())
	nC := 0
	for _, h := range []string{"impl/engine/objects.h", "impl/engine/ctx.h"} {
		for _, st := range cStruct.FindAllStringSubmatch(regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllString(src[h], ""), -1) {
			for _, m := range cField.FindAllStringSubmatch(st[2], -1) {
				name := m[1]
				if name == "pad" {
					continue // alignment
				}
				nC++
				if !cRead[name] {
					t.Errorf("%s: %s.%s is written and never read: remove it", h, st[1], name)
				}
			}
		}
	}
	if len(fields) < 100 || nC < 40 {
		t.Fatalf("the scan found %d Go fields and %d engine C fields: the patterns no longer match the sources", len(fields), nC)
	}
	for _, f := range fields {
		k := f.name
		if !ast.IsExported(k) {
			k = f.pkg + "." + k
		}
		if reads[k] || mapKeys[f.pkg+"."+f.typ] || writeOnlyAllowed[f.pkg+"."+f.typ] != "" {
			continue
		}
		t.Errorf("%s: %s.%s is written and never read: remove it", f.at, f.typ, f.name)
	}
}

// cFieldsRead returns the names that src reads as a field: after -> or ., and not the target of
// an assignment (the next character other than white space is not =, or it begins ==).
func cFieldsRead(src string) map[string]bool {
	read := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?:->|\.)(\w+)`).FindAllStringSubmatchIndex(src, -1) {
		rest := strings.TrimLeft(src[m[1]:], " \t\n\r\f")
		if rest != "" && (rest[0] != '=' || strings.HasPrefix(rest, "==")) {
			read[src[m[2]:m[3]]] = true
		}
	}
	return read
}
