package optimize

import "testing"

// allocate moves a step from the group of the highest loss per parameter
// to cheaper ones, one step beyond their uniform count at most, while the
// linear estimate falls and the parameters stay at least the uniform
// total.
func TestAllocate(t *testing.T) {
	gs := []*GlobalGroup{
		{Layers: []string{"a"}, Channels: 64, Uniform: 8, ParamsPerChannel: 100, Loss: 0.001},  // 1.25e-6 a param
		{Layers: []string{"b"}, Channels: 64, Uniform: 8, ParamsPerChannel: 100, Loss: 0.0001}, // 1.25e-7
		{Layers: []string{"c"}, Channels: 60, Uniform: 4, ParamsPerChannel: 300, Loss: 0.01},   // 8.3e-6: the last group
		{Layers: []string{"d"}, Channels: 16, Uniform: 8, ParamsPerChannel: 50, Loss: 0.00001}, // 2.5e-8, but 8 left
	}
	allocate(gs, 8)
	got := map[string]int64{}
	var params, uniform int64
	for _, g := range gs {
		got[g.Layers[0]] = g.Removed
		params += g.Removed * g.ParamsPerChannel
		uniform += g.Uniform * g.ParamsPerChannel
	}
	// c (4 channels, 1,200 params) goes first: b takes a step (800),
	// then a (800 more); a's own steps cost more than b's: b is at its
	// cap, so a's removal stays. d cannot take a step (8 channels left).
	want := map[string]int64{"a": 16, "b": 16, "c": 0, "d": 8}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("group %s removes %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	if params < uniform {
		t.Errorf("%d parameters removed, fewer than the uniform %d", params, uniform)
	}
}
