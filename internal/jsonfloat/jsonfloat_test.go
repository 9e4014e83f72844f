package jsonfloat

import (
	"encoding/json"
	"math"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	type doc struct {
		X []Float `json:"x"`
	}
	in := doc{X: []Float{1.5, 0, Float(math.NaN()), Float(math.Inf(1)), Float(math.Inf(-1)), -2e-300}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"x":[1.5,0,"NaN","+Inf","-Inf",-2e-300]}`; string(b) != want {
		t.Errorf("encoded %s, want %s", b, want)
	}
	var out doc
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	for i := range in.X {
		a, c := float64(in.X[i]), float64(out.X[i])
		if a != c && !(math.IsNaN(a) && math.IsNaN(c)) {
			t.Errorf("x[%d]: %v came back as %v", i, a, c)
		}
	}
	var bad doc
	if err := json.Unmarshal([]byte(`{"x":["nan"]}`), &bad); err == nil {
		t.Error(`"nan" was accepted`)
	}
}

func TestText(t *testing.T) {
	for _, c := range []struct {
		f    Float
		want string
	}{{0.5, "0.500"}, {Float(math.NaN()), "n/a"}, {Float(math.Inf(1)), "+Inf"}, {Float(math.Inf(-1)), "-Inf"}} {
		if got := c.f.Text("%.3f"); got != c.want {
			t.Errorf("%v: %q, want %q", c.f, got, c.want)
		}
	}
}
