#!/usr/bin/env bash
# render.sh: the table of docs/PERFORMANCE.md, rendered from the results file
# of one `make bench` run (tests/c/bench.sh writes build/bench/results.tsv),
# so that the table cannot drift from a run.
#
#   bash tests/c/bench/render.sh [-a] RESULTS.tsv          the table on stdout
#   bash tests/c/bench/render.sh [-a] RESULTS.tsv DOC      DOC's lines between
#        <!-- bench-table:begin --> and <!-- bench-table:end --> replaced by it
#
# The table is a line naming the run (its date, commit, machine, load, the
# sections run and the closing verdict, from the file's '#' lines), then one
# Markdown table: the rows marked for it (column table = 1; -a: every row),
# grouped by section in the order the sections first appear, each with its
# figure, its reference, the ratio, the goal and whether it was met. A row
# whose name starts with spaces (a proof row under the row above) is set in
# italics. Figures are in the file's units (ns, GB/s, /s, count, KiB) and
# printed in human ones; a figure not measured reads n/a. A '#note' line
# (#note, SECTION, TEXT: what a section's rows rest on, e.g. the transport a
# reference chose) is set in italics under its section's name, when the
# section is shown. Generic: it renders whatever rows the file has; it
# knows no row by name.
#
# Exit status 1 when the file has no header line, DOC has not exactly one pair
# of markers, or no row is to be shown.
set -u
all=0
if [ "${1:-}" = -a ]; then
  all=1
  shift
fi
[ $# -ge 1 ] && [ $# -le 2 ] || {
  echo "usage: render.sh [-a] RESULTS.tsv [DOC]" >&2
  exit 2
}
tsv=$1 doc=${2:-}
[ -r "$tsv" ] || {
  echo "render.sh: cannot read $tsv" >&2
  exit 1
}

table() {
  awk -F'\t' -v all="$all" '
    function human(v, u) {
      if (v ~ /^ *$/) return "n/a"
      v += 0
      if (u == "ns") {
        if (v >= 1e9) return sprintf("%.2f s", v / 1e9)
        if (v >= 1e6) return sprintf("%.2f ms", v / 1e6)
        if (v >= 1e3) return sprintf("%.1f µs", v / 1e3)
        if (v >= 100) return sprintf("%.0f ns", v)
        return sprintf("%.1f ns", v)
      }
      if (u == "/s") return (v >= 1e6) ? sprintf("%.1f M/s", v / 1e6) : sprintf("%.0f /s", v)
      if (u == "count") return sprintf("%.0f", v)
      if (u == "KiB") return (v >= 10240) ? sprintf("%.1f MiB", v / 1024) : sprintf("%.0f KiB", v)
      return sprintf("%.2f %s", v, u)
    }
    function goal(g) {
      gsub(/<=/, "≤", g); gsub(/>=/, "≥", g); gsub(/ x /, " × ", g)
      return g
    }
    $1 == "#note" { t = $3; gsub(/\|/, "\\|", t); note[$2] = note[$2] "| _" t "_ | | | | | |\n"; next }
    /^#/ { k = substr($1, 2); meta[k] = $2; next }
    !hdr { if ($1 != "section" || $2 != "row") { bad = 1; exit 1 } hdr = 1; next }
    NF < 9 { next }
    all || $9 == 1 {
      if (!($1 in seen)) { seen[$1] = 1; order[++ns] = $1 }
      r = ++nrows[$1]
      name = $2
      if (name ~ /^ /) { sub(/^ +/, "", name); name = "_" name "_" }
      ratio = ($6 ~ /^[0-9.]+$/) ? $6 " ×" : ($5 == "" ? "" : "n/a")
      ref = ($5 == "") ? "" : human($5, $4)
      met = $8; if (met == "NO") met = "**no**"
      line[$1, r] = "| " name " | " human($3, $4) " | " ref " | " ratio " | " goal($7) " | " met " |"
    }
    END {
      if (bad || !hdr) { print "render.sh: no header line (section, row, figure, ...)" > "/dev/stderr"; exit 1 }
      if (ns == 0) { print "render.sh: no row to show" > "/dev/stderr"; exit 1 }
      s = "One `make bench` run: " meta["date"] ", commit `" meta["commit"] "`, " meta["machine"]
      if (meta["load"] != "") s = s " (load average " meta["load"] " at the start)"
      s = s "; sections: " meta["sections"] "; BENCH_REPS=" meta["reps"]
      if (meta["end"] != "") s = s "; " meta["end"]
      if (meta["verdict"] != "") s = s "; " meta["verdict"]
      print s "."
      print ""
      print "| | figure | reference | ratio | goal | met? |"
      print "|---|---|---|---|---|---|"
      for (i = 1; i <= ns; i++) {
        print "| **" order[i] "** | | | | | |"
        if (order[i] in note) printf "%s", note[order[i]]
        for (r = 1; r <= nrows[order[i]]; r++) print line[order[i], r]
      }
    }' "$tsv"
}

if [ -z "$doc" ]; then
  table
  exit
fi
begin='<!-- bench-table:begin -->' end='<!-- bench-table:end -->'
if [ "$(grep -cxF "$begin" "$doc")" != 1 ] || [ "$(grep -cxF "$end" "$doc")" != 1 ]; then
  echo "render.sh: $doc needs exactly one line '$begin' and one '$end'" >&2
  exit 1
fi
new=$(table) || exit 1
tmp=$(mktemp) || exit 1
TABLE=$new awk -v b="$begin" -v e="$end" '
  $0 == b { print; print ENVIRON["TABLE"]; skip = 1; next }
  $0 == e { skip = 0 }
  !skip' "$doc" >"$tmp" && cat "$tmp" >"$doc"
rc=$?
rm -f "$tmp"
exit $rc
