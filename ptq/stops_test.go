package ptq

import (
	"maps"
	"testing"
	"time"
)

// TestStopper: a bounded loop stops at its deadline and records the count
// it reached; a replay of that record stops at the same count whatever
// the deadlines, and a loop the record does not list runs to its end. A
// second loop of the same name is recorded apart.
func TestStopper(t *testing.T) {
	past, future := time.Now().Add(-time.Second), time.Now().Add(time.Hour)
	s := newStopper(false, nil)
	a, b, a2 := s.loop("a"), s.loop("b"), s.loop("a")
	if a(3, future) || a(4, time.Time{}) {
		t.Fatal("stopped before the deadline")
	}
	if !a(5, past) || !a(6, past) {
		t.Fatal("did not stop after the deadline")
	}
	for n := range 10 {
		if b(n, future) {
			t.Fatal("b stopped")
		}
	}
	if !a2(0, past) {
		t.Fatal("the second a did not stop")
	}
	got := s.stops()
	if want := (Stops{"a": 5, "a#2": 0}); !maps.Equal(got, want) {
		t.Fatalf("recorded %v, want %v", got, want)
	}

	r := newStopper(true, got)
	a, b, a2 = r.loop("a"), r.loop("b"), r.loop("a")
	for n := range 5 {
		if a(n, past) {
			t.Fatalf("the replay stopped a at %d, before the recorded 5", n)
		}
	}
	if !a(5, future) || b(100, past) || !a2(0, future) {
		t.Fatal("the replay did not stop where recorded, or stopped b")
	}
	if !maps.Equal(r.stops(), got) {
		t.Errorf("a replay records %v, want %v", r.stops(), got)
	}
	if newStopper(false, nil).stops() != nil || newStopper(true, nil).stops() != nil {
		t.Error("nothing stopped, yet something is recorded")
	}
	var none *stopper
	if none.loop("x")(0, future) || !none.loop("x")(0, past) || none.stops() != nil {
		t.Error("a nil stopper does not follow the deadline alone")
	}
}
