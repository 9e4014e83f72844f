package report

import (
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestHTMLRendersInChromium opens report.html in headless Chromium, takes
// a screenshot and checks that the charts were drawn: the series colours,
// which only the charts use, cover a visible area. It skips without
// Chromium unless OPTC_REQUIRE_CHROMIUM is set (scripts/check-report-html.sh
// sets it); OPTC_REPORT_HTML names a real build's page to check instead of
// a sample.
func TestHTMLRendersInChromium(t *testing.T) {
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		if os.Getenv("OPTC_REQUIRE_CHROMIUM") != "" {
			t.Fatal("OPTC_REQUIRE_CHROMIUM is set but no chromium is on PATH (Debian: apt-get install -y chromium)")
		}
		t.Skip("no chromium on PATH")
	}
	dir := t.TempDir()
	page := os.Getenv("OPTC_REPORT_HTML")
	if page == "" {
		page = filepath.Join(dir, "report.html")
		f, err := os.Create(page)
		if err != nil {
			t.Fatal(err)
		}
		if err := sample(steady, []float64{5, 5.1, 4.9, 5, 5}, 97.5, 0.9995).WriteHTML(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	abs, err := filepath.Abs(page)
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "shot.png")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--screenshot="+shot, "--window-size=1400,1600", "file://"+abs)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if keep := os.Getenv("OPTC_SCREENSHOT"); keep != "" {
		if b, err := os.ReadFile(shot); err == nil {
			os.WriteFile(keep, b, 0o644)
		}
	}
	// The first two series colours: the input model and the first artifact.
	for _, hex := range palette[:2] {
		want, _ := strconv.ParseUint(hex[1:], 16, 32)
		wr, wg, wb := int(want>>16), int(want>>8&0xff), int(want&0xff)
		n := 0
		bounds := img.Bounds()
		for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
			for x := bounds.Min.X; x < bounds.Max.X; x++ {
				r, g, b, _ := img.At(x, y).RGBA()
				if near(int(r>>8), wr) && near(int(g>>8), wg) && near(int(b>>8), wb) {
					n++
				}
			}
		}
		t.Logf("%s: %d pixels", hex, n)
		if n < 300 {
			t.Errorf("the charts are not visible: %d pixels of series colour %s in the screenshot (want >= 300)", n, hex)
		}
	}
}

func near(a, b int) bool { return a-b < 24 && b-a < 24 }
