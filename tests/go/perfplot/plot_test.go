// Package perfplot checks mscclpp-perf-plot: perf -J files in, an SVG plot of bus bandwidth against size out.
package perfplot

import (
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// plotter is the built command, failing when make has not built it.
func plotter(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "..", "build", "bin", "mscclpp-perf-plot")) // go test runs in the package's directory
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not built (run make first): %v", p, err)
	}
	return p
}

type svg struct {
	XMLName   xml.Name   `xml:"svg"`
	Polylines []polyline `xml:"polyline"`
	Texts     []text     `xml:"text"`
}

type polyline struct {
	Class  string `xml:"class,attr"`
	Points string `xml:"points,attr"`
	Stroke string `xml:"stroke,attr"`
}

type text struct {
	Class string `xml:"class,attr"`
	Body  string `xml:",chardata"`
}

type point struct{ x, y float64 }

func points(t *testing.T, s string) []point {
	t.Helper()
	var out []point
	for _, f := range strings.Fields(s) {
		xy := strings.Split(f, ",")
		if len(xy) != 2 {
			t.Fatalf("point %q", f)
		}
		x, err1 := strconv.ParseFloat(xy[0], 64)
		y, err2 := strconv.ParseFloat(xy[1], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("point %q", f)
		}
		out = append(out, point{x, y})
	}
	return out
}

func plot(t *testing.T, args ...string) svg {
	t.Helper()
	outPath := filepath.Join(t.TempDir(), "plot.svg")
	if b, err := exec.Command(plotter(t), append([]string{"-o", outPath}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("mscclpp-perf-plot %v: %v\n%s", args, err, b)
	}
	b, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc svg
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, b)
	}
	return doc
}

// Two runs: one line each, points in size order on a log axis, higher bandwidth drawn higher,
// sizes named on the x axis, each run named in the legend.
func TestPlotTwoRuns(t *testing.T) {
	doc := plot(t, "testdata/run_a.json", "eight=testdata/run_b.json")
	var runs []polyline
	for _, p := range doc.Polylines {
		if p.Class == "run" {
			runs = append(runs, p)
		}
	}
	if len(runs) != 2 || runs[0].Stroke == runs[1].Stroke {
		t.Fatalf("%d run lines (colours %v), want 2 of different colours", len(runs), runs)
	}
	a, b := points(t, runs[0].Points), points(t, runs[1].Points)
	if len(a) != 3 || len(b) != 2 {
		t.Fatalf("points: %d and %d, want 3 and 2", len(a), len(b))
	}
	// sizes 1 KiB, 32 KiB, 1 MiB: equal steps on a log2 axis (5 powers each)
	if d1, d2 := a[1].x-a[0].x, a[2].x-a[1].x; d1 <= 0 || d1-d2 > 0.05 || d2-d1 > 0.05 {
		t.Errorf("x steps %v and %v: want equal and positive (log scale)", d1, d2)
	}
	if a[0].x != b[0].x || a[1].x != b[1].x {
		t.Errorf("the same sizes at different x: %v vs %v", a, b)
	}
	// busbw 1, 4, 8 (a) and 2, 3 (b): SVG y grows downwards
	if !(a[0].y > a[1].y && a[1].y > a[2].y) || !(b[0].y < a[0].y && b[1].y > a[1].y) {
		t.Errorf("heights do not follow the bandwidths: a %v, b %v", a, b)
	}
	// y is linear from 0: 8 GB/s is twice as far above the axis as 4
	base := a[0].y + (a[0].y-a[1].y)/3 // y of 0 GB/s from busbw 1 and 4
	if r := (base - a[2].y) / (base - a[1].y); r < 1.98 || r > 2.02 {
		t.Errorf("8 GB/s is %.3f times as high as 4 GB/s, want 2", r)
	}
	var legend, xticks []string
	for _, tx := range doc.Texts {
		switch tx.Class {
		case "legend":
			legend = append(legend, tx.Body)
		case "xtick":
			xticks = append(xticks, tx.Body)
		}
	}
	if strings.Join(legend, "|") != "run_a.json (4 ranks)|eight" {
		t.Errorf("legend %q", legend)
	}
	joined := strings.Join(xticks, "|")
	for _, want := range []string{"1 KiB", "1 MiB"} {
		if !strings.Contains(joined, want) {
			t.Errorf("x ticks %q lack %q", xticks, want)
		}
	}
}

// -i plots the in-place column.
func TestPlotInPlace(t *testing.T) {
	out := plot(t, "-i", "testdata/run_a.json")
	in := points(t, out.Polylines[len(out.Polylines)-1].Points)
	// in-place busbw 0.5, 2, 6: the middle point lies at a third of the top one's height
	base := in[0].y + (in[0].y-in[1].y)/3 // y of 0 from 0.5 and 2
	if r := (base - in[2].y) / (base - in[1].y); r < 2.97 || r > 3.03 {
		t.Errorf("in-place: 6 GB/s is %.3f times as high as 2 GB/s, want 3", r)
	}
}

// A file that is not a -J file is refused, naming it.
func TestPlotRefusesOtherFiles(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"traceEvents":[]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := exec.Command(plotter(t), "-o", filepath.Join(t.TempDir(), "x.svg"), bad).CombinedOutput()
	if err == nil || !strings.Contains(string(b), "bad.json: not a -J file of mscclpp_allgather_perf") {
		t.Errorf("err %v, output %q", err, b)
	}
}
