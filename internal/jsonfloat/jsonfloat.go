// Package jsonfloat is the one way optc writes a measurement that may be
// NaN or infinite: encoding/json refuses such float64s ("json: unsupported
// value: NaN"), which used to throw a whole build away at its last stage.
// A Float is a float64 that encodes finite values as JSON numbers and NaN,
// +Inf and -Inf as the JSON strings "NaN", "+Inf" and "-Inf", and decodes
// both forms back, so a report round-trips losslessly.
package jsonfloat

import (
	"encoding/json"
	"fmt"
	"math"
)

// Float is a float64 whose JSON form can hold NaN and the infinities.
type Float float64

// The JSON strings of the non-finite values.
const (
	NaN    = "NaN"
	PosInf = "+Inf"
	NegInf = "-Inf"
)

// MarshalJSON writes a number, or "NaN", "+Inf" or "-Inf".
func (f Float) MarshalJSON() ([]byte, error) {
	x := float64(f)
	switch {
	case math.IsNaN(x):
		return []byte(`"` + NaN + `"`), nil
	case math.IsInf(x, 1):
		return []byte(`"` + PosInf + `"`), nil
	case math.IsInf(x, -1):
		return []byte(`"` + NegInf + `"`), nil
	}
	return json.Marshal(x)
}

// UnmarshalJSON reads a number or one of the three strings; null leaves
// the value as it is, as it does for a float64.
func (f *Float) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch s {
		case NaN:
			*f = Float(math.NaN())
		case PosInf:
			*f = Float(math.Inf(1))
		case NegInf:
			*f = Float(math.Inf(-1))
		default:
			return fmt.Errorf("number or %q, %q or %q expected, got the string %q", NaN, PosInf, NegInf, s)
		}
		return nil
	}
	var x float64
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	*f = Float(x)
	return nil
}

// Finite reports whether f is neither NaN nor infinite.
func (f Float) Finite() bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }

// Text formats f with format (a verb such as "%.5f") when finite; NaN, a
// measurement that could not be made, reads "n/a", and the infinities
// "+Inf" and "-Inf".
func (f Float) Text(format string) string {
	x := float64(f)
	switch {
	case math.IsNaN(x):
		return "n/a"
	case math.IsInf(x, 1):
		return PosInf
	case math.IsInf(x, -1):
		return NegInf
	}
	return fmt.Sprintf(format, x)
}
