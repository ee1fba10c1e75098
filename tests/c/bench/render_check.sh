#!/usr/bin/env bash
# render_check.sh OUT_DIR: the checks of render.sh (run by tests/docs/check.sh),
# one PASS/FAIL line each:
#   bench-render-fixture   testdata/results.tsv renders to testdata/table.md
#                          (units, sections grouped, proof rows, verdicts, the
#                          run's line), and the same rewrites a page between
#                          its markers and nothing else
#   bench-render-refuses   a file with no header line, and a page without one
#                          pair of markers, exit 1 and leave the page as it was
#   bench-render-doc       docs/PERFORMANCE.md's table is the rendering of
#                          docs/bench-results.tsv (make bench-doc wrote both),
#                          and the page stays readable: at most 300 lines
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:?usage: render_check.sh OUT_DIR}
mkdir -p "$out" || exit 1
render=$here/render.sh
status=0
result() { # name ok log
  if [ "$2" = 1 ]; then echo "PASS $1"; else
    echo "FAIL $1"
    sed 's/^/    /' "$3" | tail -n 40
    status=1
  fi
}

# the page between markers: TEXT before, the table, TEXT after
log=$out/fixture.log ok=1
: >"$log"
bash "$render" "$here/testdata/results.tsv" >"$out/table.md" 2>>"$log" || ok=0
diff -u "$here/testdata/table.md" "$out/table.md" >>"$log" || ok=0
printf '%s\n' '# page' 'before' '<!-- bench-table:begin -->' 'an old table' '<!-- bench-table:end -->' 'after' >"$out/page.md"
bash "$render" "$here/testdata/results.tsv" "$out/page.md" 2>>"$log" || ok=0
{ printf '%s\n' '# page' 'before' '<!-- bench-table:begin -->'
  cat "$here/testdata/table.md"
  printf '%s\n' '<!-- bench-table:end -->' 'after'; } >"$out/page.want"
diff -u "$out/page.want" "$out/page.md" >>"$log" || ok=0
result bench-render-fixture $ok "$log"

log=$out/refuses.log ok=1
: >"$log"
grep -v '^section' "$here/testdata/results.tsv" >"$out/noheader.tsv"
if bash "$render" "$out/noheader.tsv" >>"$log" 2>&1; then echo "-- a file without its header line rendered" >>"$log"; ok=0; fi
printf '%s\n' 'text' '<!-- bench-table:begin -->' 'keep' >"$out/nomarker.md"
cp "$out/nomarker.md" "$out/nomarker.want"
if bash "$render" "$here/testdata/results.tsv" "$out/nomarker.md" >>"$log" 2>&1; then echo "-- a page without its end marker was rewritten" >>"$log"; ok=0; fi
cmp -s "$out/nomarker.want" "$out/nomarker.md" || { echo "-- the page changed" >>"$log"; ok=0; }
result bench-render-refuses $ok "$log"

log=$out/doc.log ok=1
: >"$log"
cp "$root/docs/PERFORMANCE.md" "$out/PERFORMANCE.md"
bash "$render" "$root/docs/bench-results.tsv" "$out/PERFORMANCE.md" >>"$log" 2>&1 || ok=0
if ! diff -u "$root/docs/PERFORMANCE.md" "$out/PERFORMANCE.md" >>"$log"; then
  echo "-- docs/PERFORMANCE.md's table is not docs/bench-results.tsv's: run make bench-doc (after make bench)" >>"$log"
  ok=0
fi
lines=$(wc -l <"$root/docs/PERFORMANCE.md")
if [ "$lines" -gt 300 ]; then
  echo "-- docs/PERFORMANCE.md has $lines lines, more than 300: fewer rows in the table (bench.sh's KEY) or shorter prose" >>"$log"
  ok=0
fi
result bench-render-doc $ok "$log"
exit $status
