package report

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/optc-dev/optc/config"
)

// FuzzParse feeds report.json bytes to what optc diff does with them:
// parse, compare against itself with every gate on, and render. A hostile
// or damaged report must give an error, never a panic.
func FuzzParse(f *testing.F) {
	full, err := json.Marshal(sample(steady, []float64{5, 5.1, 4.9, 5, 5}, 97.5, 0.9995))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(full)
	withNaN, err := json.Marshal(allNaN())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(withNaN)
	f.Add([]byte(`{"schema":1,"models":[{"name":"a","role":"input"},{"name":"b","role":"artifact","accuracy":{"outputs":[{"cosine":"NaN","snr_db":"-Inf","max_abs_error":"+Inf"}]}}]}`))
	f.Add([]byte(`{"schema":1,"models":[{"name":"a","role":"input"}]}`))
	f.Add([]byte(`{"schema":1,"models":[null,{"role":"artifact","latency":{"batches":[{"batch":1}]}}]}`))
	gates := config.Gates{MaxAccuracyDrop: 1, MinCosine: 0.99, MaxLatencyRegression: 10, Percentile: "p99", MinSpeedup: 1.1, MaxSize: 1000}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b, "report.json")
		if err != nil {
			return
		}
		if err := Compare(r, r, gates).Write(io.Discard); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteMarkdown(io.Discard); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteHTML(io.Discard); err != nil {
			t.Fatal(err)
		}
	})
}
