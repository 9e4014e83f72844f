package export

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestTRTCalibCacheKnownValues(t *testing.T) {
	var b bytes.Buffer
	// amax 127 is scale 1.0 (3f800000); amax 1 (an image in [0, 1]) is
	// 1/127 = 0.007874016 (3c010204).
	if err := WriteTRTCalibCache(&b, "8601", map[string]float64{"x": 127, "data": 1, "zero": 0}); err != nil {
		t.Fatal(err)
	}
	want := "TRT-8601-EntropyCalibration2\ndata: 3c010204\nx: 3f800000\nzero: 00000000\n"
	if b.String() != want {
		t.Errorf("wrote\n%s\nwant\n%s", b.String(), want)
	}
}

func TestTRTCalibCacheRoundTrip(t *testing.T) {
	amax := map[string]float64{
		"input": 1, "/conv1/Conv_output_0": 6.25, "(Unnamed Layer* 48) [Constant]_output": 0.7396,
		"a: b": 3.5, "tiny": 1e-30, "big": 1e30,
	}
	var first, second bytes.Buffer
	if err := WriteTRTCalibCache(&first, "100300", amax); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		second.Reset()
		if err := WriteTRTCalibCache(&second, "100300", amax); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first.Bytes(), second.Bytes()) {
			t.Fatalf("two writes differ:\n%s\n%s", first.String(), second.String())
		}
	}
	version, got, err := ReadTRTCalibCache(bytes.NewReader(first.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if version != "100300" || len(got) != len(amax) {
		t.Fatalf("version %q, %d tensors: %v", version, len(got), got)
	}
	for name, a := range amax {
		// The scale is stored as float32: a relative error of 2^-24.
		if g, ok := got[name]; !ok || math.Abs(g-a) > a*1e-7 {
			t.Errorf("%q: read %v, wrote %v", name, g, a)
		}
	}
}

// TestReadTRTCalibCacheOtherWriters reads caches as other tools write
// them: TensorRT 7's sampleINT8 table (from its README), a MinMax
// calibrator, CRLF line ends, no final newline.
func TestReadTRTCalibCacheOtherWriters(t *testing.T) {
	for _, c := range []struct {
		name, text, version string
		tensors             int
		probe               string
		amax                float64
	}{
		{"sampleINT8", "TRT-7000-EntropyCalibration2\ndata: 3c008912\nconv1: 3c88edfc\npool1: 3c88edfc\nconv2: 3ddc858b\npool2: 3ddc858b\nip1: 3db6bd6e\nip2: 3e691968\nprob: 3c010a14\n",
			"7000", 8, "prob", 1.000244}, // softmax output: amax 1 up to the entropy histogram's bin edge
		{"minmax, CRLF, no final newline", "TRT-8601-MinMaxCalibration\r\ninput: 3f800000\r\n(Unnamed Layer* 3) [Shuffle]_output: 40000000",
			"8601", 2, "(Unnamed Layer* 3) [Shuffle]_output", 254},
	} {
		t.Run(c.name, func(t *testing.T) {
			version, amax, err := ReadTRTCalibCache(strings.NewReader(c.text))
			if err != nil {
				t.Fatal(err)
			}
			if version != c.version || len(amax) != c.tensors || math.Abs(amax[c.probe]-c.amax) > 1e-6 {
				t.Errorf("version %q, %d tensors, %q amax %v", version, len(amax), c.probe, amax[c.probe])
			}
		})
	}
}

func TestReadTRTCalibCacheMalformed(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"empty", "", "empty"},
		{"no header", "input: 3f800000\n", "line 1"},
		{"header without calibrator", "TRT-8601\n", "line 1"},
		{"no colon", "TRT-8601-EntropyCalibration2\ninput 3f800000\n", "line 2"},
		{"not hex", "TRT-8601-EntropyCalibration2\ninput: 3f80000g\n", "line 2"},
		{"too long", "TRT-8601-EntropyCalibration2\ninput: 3f8000000\n", "line 2"},
		{"NaN", "TRT-8601-EntropyCalibration2\na: 3f800000\nb: 7fc00000\n", "line 3"},
		{"negative", "TRT-8601-EntropyCalibration2\na: bf800000\n", "line 2"},
		{"duplicate", "TRT-8601-EntropyCalibration2\na: 3f800000\na: 3f800000\n", "twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := ReadTRTCalibCache(strings.NewReader(c.text))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

func TestWriteTRTCalibCacheRefuses(t *testing.T) {
	for _, c := range []struct {
		name    string
		version string
		amax    map[string]float64
		want    string
	}{
		{"dotted version", "8.6.1", map[string]float64{"a": 1}, "not digits"},
		{"NaN", "8601", map[string]float64{"a": math.NaN()}, `"a"`},
		{"negative", "8601", map[string]float64{"a": -1}, `"a"`},
		{"overflow", "8601", map[string]float64{"a": 1e300}, "float32"},
		{"newline in name", "8601", map[string]float64{"a\nb": 1}, "one line"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			err := WriteTRTCalibCache(&b, c.version, c.amax)
			if err == nil || !strings.Contains(err.Error(), c.want) || b.Len() != 0 {
				t.Errorf("error %v (wrote %d bytes), want one mentioning %q", err, b.Len(), c.want)
			}
		})
	}
}

// FuzzReadTRTCalibCache: any input is parsed or refused without a panic,
// and what is parsed writes back and reads again to the same scales.
func FuzzReadTRTCalibCache(f *testing.F) {
	var b bytes.Buffer
	if err := WriteTRTCalibCache(&b, "100300", map[string]float64{"input": 1, "/conv/Conv_output_0": 4.2, "(Unnamed Layer* 1) [Shuffle]_output": 0.5}); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte("TRT-8601-MinMaxCalibration\r\na: 3f800000"))
	f.Fuzz(func(t *testing.T, data []byte) {
		version, amax, err := ReadTRTCalibCache(bytes.NewReader(data))
		if err != nil {
			return
		}
		if strings.Trim(version, "0123456789") != "" {
			return // a header another tool wrote; WriteTRTCalibCache takes digits only
		}
		var out bytes.Buffer
		if err := WriteTRTCalibCache(&out, version, amax); err != nil {
			t.Fatalf("parsed cache does not write back: %v", err)
		}
		_, again, err := ReadTRTCalibCache(&out)
		if err != nil {
			t.Fatalf("written cache does not read back: %v\n%s", err, out.String())
		}
		for name, a := range amax {
			if float32(again[name]/127) != float32(a/127) {
				t.Fatalf("%q: scale %v became %v", name, a/127, again[name]/127)
			}
		}
	})
}
