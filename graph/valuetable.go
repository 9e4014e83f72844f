package graph

// ValueTable maps values to T by their IDs (Value.ID): a slice, so a
// lookup neither hashes nor probes, and the slots of values made one
// after another sit side by side. A value whose slot another value holds
// (IDs shared after a graph made apart was attached) goes to a map, so
// the table is exact for any values.
type ValueTable[T any] struct {
	slots []valueSlot[T]
	spill map[*Value]T
	n     int
}

type valueSlot[T any] struct {
	v *Value
	x T
}

// NewValueTable returns an empty table with room for the IDs below size
// (g.ValueIDs() for the values of g's model).
func NewValueTable[T any](size int) *ValueTable[T] {
	return &ValueTable[T]{slots: make([]valueSlot[T], max(size, 0))}
}

// Lookup returns what the table holds for v and whether it holds it (a
// nil table holds nothing).
func (t *ValueTable[T]) Lookup(v *Value) (T, bool) {
	if t == nil {
		var zero T
		return zero, false
	}
	if v != nil && v.id < len(t.slots) && t.slots[v.id].v == v {
		return t.slots[v.id].x, true
	}
	x, ok := t.spill[v]
	return x, ok
}

// Get returns what the table holds for v, or T's zero value.
func (t *ValueTable[T]) Get(v *Value) T {
	x, _ := t.Lookup(v)
	return x
}

// Set makes the table hold x for v.
func (t *ValueTable[T]) Set(v *Value, x T) {
	if v.id >= len(t.slots) && v.id < 2*len(t.slots)+1024 {
		t.slots = append(t.slots, make([]valueSlot[T], v.id+1-len(t.slots))...)
	}
	if v.id < len(t.slots) {
		// A slot, once taken, keeps its value: one whose slot is taken
		// is in the map for good.
		switch s := &t.slots[v.id]; s.v {
		case v:
			s.x = x
			return
		case nil:
			s.v, s.x = v, x
			t.n++
			return
		}
	}
	if t.spill == nil {
		t.spill = map[*Value]T{}
	}
	if _, ok := t.spill[v]; !ok {
		t.n++
	}
	t.spill[v] = x
}

// Len is the number of values the table holds.
func (t *ValueTable[T]) Len() int {
	if t == nil {
		return 0
	}
	return t.n
}

// All calls fn for each value the table holds: by ID, then the others
// in no particular order.
func (t *ValueTable[T]) All(fn func(*Value, T)) {
	if t == nil {
		return
	}
	for _, s := range t.slots {
		if s.v != nil {
			fn(s.v, s.x)
		}
	}
	for v, x := range t.spill {
		fn(v, x)
	}
}
