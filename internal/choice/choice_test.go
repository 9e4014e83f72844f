package choice

import "testing"

type name string

func TestOr(t *testing.T) {
	for _, c := range []struct {
		in   []name
		want string
	}{
		{nil, ""},
		{[]name{"a"}, "a"},
		{[]name{"a", "b"}, "a or b"},
		{[]name{"a", "b", "c"}, "a, b or c"},
	} {
		if got := Or(c.in); got != c.want {
			t.Errorf("Or(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := Strings([]name{"x", "y"}); len(got) != 2 || got[0] != "x" || got[1] != "y" {
		t.Errorf("Strings: %q", got)
	}
}
