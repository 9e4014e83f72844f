package shapes_test

import (
	"strings"
	"testing"

	"github.com/optc-dev/optc/graph"
)

func TestElementwise(t *testing.T) {
	b := newBuilder(t, 17)
	x := b.input("x", "float32[N,3,1,5]")
	y := b.input("y", "float32[4,1]")
	m := b.input("m", "float32[M,3,1,5]")
	c := b.input("c", "bool[3,1]")
	add := b.op1("Add", nil, x, y)
	sym := b.op1("Mul", nil, x, m)
	same := b.op1("Sub", nil, x, x)
	rel := b.op1("Relu", nil, add)
	eq := b.op1("Equal", nil, x, y)
	wh := b.op1("Where", nil, c, b.input("w1", "float32[1,4]"), b.input("w0", "float32[]"))
	cast := b.op1("Cast", attrs(aInt("to", int64(graph.Int64))), x)
	sum := b.op1("Sum", nil, y, x, b.input("s", "float32[5]"))
	pow := b.op1("Pow", nil, x, b.input("e", "int32[]"))
	clip := b.op1("Clip", nil, x, nil, b.input("hi", "float32[]"))
	drop := b.op("Dropout", 2, nil, x)
	unk := b.op1("Add", nil, x, b.input("u", "float32[*]"))
	res := b.infer()
	want(t, res,
		add, "float32[N,3,4,5]",
		sym, "float32[?,3,1,5]",
		same, "float32[N,3,1,5]",
		rel, "float32[N,3,4,5]",
		eq, "bool[N,3,4,5]",
		wh, "float32[3,4]",
		cast, "int64[N,3,1,5]",
		sum, "float32[N,3,4,5]",
		pow, "float32[N,3,1,5]",
		clip, "float32[N,3,1,5]",
		drop[0], "float32[N,3,1,5]",
		drop[1], "bool[N,3,1,5]",
		unk, "float32[*]",
	)
	if len(res.Conflicts) != 0 {
		t.Errorf("conflicts: %v", res.Conflicts)
	}
}

func TestBroadcastConflict(t *testing.T) {
	b := newBuilder(t, 17)
	add := b.op1("Add", nil, b.input("a", "float32[2,3]"), b.input("b", "float32[4,3]"))
	res := b.infer()
	want(t, res, add, "float32[*]")
	if len(res.Conflicts) != 1 || res.Conflicts[0].Value != nil || !strings.Contains(res.Conflicts[0].String(), "broadcast") {
		t.Errorf("conflicts: %v", res.Conflicts)
	}
}

func TestLegacyBroadcastAndOldOpsets(t *testing.T) {
	b := newBuilder(t, 6)
	x := b.input("x", "float32[2,3,4]")
	add := b.op1("Add", attrs(aInt("broadcast", 1), aInt("axis", 1)), x, b.input("y", "float32[3]"))
	drop := b.op("Dropout", 2, nil, x)
	want(t, b.infer(), add, "float32[2,3,4]", drop[1], "float32[2,3,4]")
}

func TestConv(t *testing.T) {
	b := newBuilder(t, 17)
	x := b.input("x", "float32[N,3,224,224]")
	sym := b.input("s", "float32[N,3,H,W]")
	w7 := b.weights("w7", 64, 3, 7, 7)
	w3 := b.weights("w3", 8, 3, 3, 3)
	stem := b.op1("Conv", attrs(aInts("strides", 2, 2), aInts("pads", 3, 3, 3, 3)), x, w7)
	upper := b.op1("Conv", attrs(aString("auto_pad", "SAME_UPPER"), aInts("strides", 2, 2)), b.input("x225", "float32[1,3,225,225]"), w3)
	lower := b.op1("Conv", attrs(aString("auto_pad", "SAME_LOWER")), sym, w3)
	valid := b.op1("Conv", attrs(aString("auto_pad", "VALID")), b.input("x10", "float32[1,3,10,12]"), w3)
	dil := b.op1("Conv", attrs(aInts("dilations", 2, 3)), b.input("xd", "float32[1,3,10,12]"), w3)
	keep := b.op1("Conv", attrs(aInts("pads", 1, 1, 1, 1)), sym, w3)
	lose := b.op1("Conv", attrs(aInts("pads", 1, 1, 1, 1), aInts("strides", 2, 2)), sym, w3)
	grouped := b.op1("Conv", attrs(aInt("group", 32), aInts("pads", 1, 1, 1, 1), aInts("kernel_shape", 3, 3)),
		b.input("xg", "float32[1,32,8,8]"), b.weights("wg", 32, 1, 3, 3))
	conv1d := b.op1("Conv", attrs(aInts("strides", 2)), b.input("x1", "float32[2,4,9]"), b.weights("w1", 6, 4, 3))
	want(t, b.infer(),
		stem, "float32[N,64,112,112]",
		upper, "float32[1,8,113,113]",
		lower, "float32[N,8,H,W]",
		valid, "float32[1,8,8,10]",
		dil, "float32[1,8,6,6]",
		keep, "float32[N,8,H,W]",
		lose, "float32[N,8,?,?]",
		grouped, "float32[1,32,8,8]",
		conv1d, "float32[2,6,4]",
	)
}

func TestConvTranspose(t *testing.T) {
	b := newBuilder(t, 17)
	x := b.input("x", "float32[N,16,8,8]")
	w := b.weights("w", 16, 4, 3, 3)
	up := b.op1("ConvTranspose", attrs(aInts("strides", 2, 2), aInts("pads", 1, 1, 1, 1), aInts("output_padding", 1, 1)), x, w)
	grp := b.op1("ConvTranspose", attrs(aInt("group", 2), aInts("strides", 2, 2)), x, w)
	shaped := b.op1("ConvTranspose", attrs(aInts("strides", 2, 2), aInts("output_shape", 20, 21)), x, w)
	same := b.op1("ConvTranspose", attrs(aInts("strides", 2, 2), aString("auto_pad", "SAME_UPPER")), x, w)
	// Stride 4 with a kernel of 2: "same" cannot reach 4*8 = 32.
	short := b.op1("ConvTranspose", attrs(aInts("strides", 4, 4), aString("auto_pad", "SAME_LOWER")), x, b.weights("w2", 16, 4, 2, 2))
	sym := b.op1("ConvTranspose", attrs(aInts("strides", 2, 2)), b.input("s", "float32[1,16,H,8]"), w)
	want(t, b.infer(),
		up, "float32[N,4,16,16]",
		grp, "float32[N,8,17,17]",
		shaped, "float32[N,4,20,21]",
		same, "float32[N,4,16,16]",
		short, "float32[N,4,30,30]",
		sym, "float32[1,4,?,17]",
	)
}

func TestPool(t *testing.T) {
	b := newBuilder(t, 17)
	x := b.input("x", "float32[N,64,112,112]")
	mp := b.op("MaxPool", 2, attrs(aInts("kernel_shape", 3, 3), aInts("strides", 2, 2), aInts("pads", 1, 1, 1, 1)), x)
	x4 := b.input("x4", "float32[1,1,4,5]")
	floor := b.op1("MaxPool", attrs(aInts("kernel_shape", 3, 3), aInts("strides", 2, 2)), x4)
	ceil := b.op1("MaxPool", attrs(aInts("kernel_shape", 3, 3), aInts("strides", 2, 2), aInt("ceil_mode", 1)), x4)
	// ceil((5+2-2)/2)+1 = 4, but the fourth window would start in the
	// right padding: 3.
	adj := b.op1("AveragePool", attrs(aInts("kernel_shape", 2), aInts("strides", 2), aInts("pads", 1, 1), aInt("ceil_mode", 1)),
		b.input("x5", "float32[1,1,5]"))
	same := b.op1("AveragePool", attrs(aInts("kernel_shape", 3, 3), aInts("strides", 2, 2), aString("auto_pad", "SAME_UPPER")),
		b.input("x7", "float32[1,2,7,8]"))
	symKeep := b.op1("MaxPool", attrs(aInts("kernel_shape", 3, 3), aInts("pads", 1, 1, 1, 1)), b.input("s", "float32[N,8,H,W]"))
	gap := b.op1("GlobalAveragePool", nil, b.input("g", "float32[N,C,H,W]"))
	want(t, b.infer(),
		mp[0], "float32[N,64,56,56]",
		mp[1], "int64[N,64,56,56]",
		floor, "float32[1,1,1,2]",
		ceil, "float32[1,1,2,2]",
		adj, "float32[1,1,3]",
		same, "float32[1,2,4,4]",
		symKeep, "float32[N,8,H,W]",
		gap, "float32[N,C,1,1]",
	)
}

func TestMatrixProducts(t *testing.T) {
	b := newBuilder(t, 17)
	gemm := b.op1("Gemm", attrs(aInt("transA", 1), aInt("transB", 1)), b.input("a", "float32[4,M]"), b.input("b", "float32[5,4]"))
	gemm2 := b.op1("Gemm", nil, b.input("a2", "float32[N,4]"), b.weights("w", 4, 10), b.weights("bias", 10))
	mm := func(a, c string) *graph.Value {
		return b.op1("MatMul", nil, b.input("l"+a+c, "float32["+a+"]"), b.input("r"+a+c, "float32["+c+"]"))
	}
	batched := mm("N,2,3,4", "4,5")
	vecLeft := mm("3", "3,4")
	vecRight := mm("2,3,4", "4")
	dot := mm("3", "3")
	bcast := mm("1,3,4", "5,4,6")
	mmi := b.op1("MatMulInteger", nil, b.input("qa", "uint8[2,3]"), b.input("qb", "int8[3,4]"))
	want(t, b.infer(),
		gemm, "float32[M,5]",
		gemm2, "float32[N,10]",
		batched, "float32[N,2,3,5]",
		vecLeft, "float32[4]",
		vecRight, "float32[2,3]",
		dot, "float32[]",
		bcast, "float32[5,3,6]",
		mmi, "int32[2,4]",
	)
}

func TestNormalization(t *testing.T) {
	b := newBuilder(t, 17)
	x := b.input("x", "float32[N,8,H,W]")
	bn := b.op1("BatchNormalization", nil, x, b.weights("s", 8), b.weights("bb", 8), b.weights("mean", 8), b.weights("var", 8))
	ln := b.op("LayerNormalization", 3, attrs(aInt("axis", 2)), x, b.weights("g", 4))
	want(t, b.infer(),
		bn, "float32[N,8,H,W]",
		ln[0], "float32[N,8,H,W]",
		ln[1], "float32[N,8,1,1]",
	)
}

func TestReshape(t *testing.T) {
	b := newBuilder(t, 14)
	x := b.input("x", "float32[N,3,4,5]")
	keepN := b.op1("Reshape", nil, x, b.ints("t1", 0, -1))
	unnamed := b.op1("Reshape", nil, x, b.ints("t2", -1, 20))
	static := b.op1("Reshape", nil, b.input("s", "float32[2,3,4]"), b.ints("t3", 4, -1))
	zeroCopy := b.op1("Reshape", nil, b.input("s2", "float32[2,3,4]"), b.ints("t4", 0, 0, 2, 2))
	allowZero := b.op1("Reshape", attrs(aInt("allowzero", 1)), b.input("e", "float32[0,3]"), b.ints("t5", 3, 0))
	cancel := b.op1("Reshape", nil, b.input("nc", "float32[N,C,6]"), b.ints("t6", 2, -1, 3))
	length := b.op1("Reshape", nil, x, b.input("dyn", "int64[3]"))
	want(t, b.infer(),
		keepN, "float32[N,60]",
		unnamed, "float32[?,20]",
		static, "float32[4,6]",
		zeroCopy, "float32[2,3,2,2]",
		allowZero, "float32[3,0]",
		cancel, "float32[2,?,3]",
		length, "float32[?,?,?]",
	)

	// Before opset 5 the target is an attribute.
	old := newBuilder(t, 4)
	r := old.op1("Reshape", attrs(aInts("shape", 6, -1)), old.input("x", "float32[2,3,4]"))
	want(t, old.infer(), r, "float32[6,4]")
}

// TestShapeValues follows a shape computed at run time: Shape -> Gather
// -> Unsqueeze -> Concat -> Reshape keeps the batch symbol.
func TestShapeValues(t *testing.T) {
	b := newBuilder(t, 13)
	x := b.input("x", "float32[N,3,4,5]")
	shape := b.op1("Shape", nil, x)
	n := b.op1("Gather", attrs(aInt("axis", 0)), shape, b.scalar("zero", 0))
	u := b.op1("Unsqueeze", nil, n, b.ints("axes", 0))
	target := b.op1("Concat", attrs(aInt("axis", 0)), u, b.ints("rest", -1))
	r := b.op1("Reshape", nil, x, target)
	hw := b.op1("Slice", nil, shape, b.ints("st", 2), b.ints("en", maxInt64))
	prod := b.op1("Mul", nil, b.op1("Gather", nil, shape, b.scalar("i2", 2)), b.op1("Gather", nil, shape, b.scalar("i3", 3)))
	flat := b.op1("Reshape", nil, x, b.op1("Concat", attrs(aInt("axis", 0)),
		u, b.ints("three", 3), b.op1("Unsqueeze", nil, prod, b.ints("axes2", 0))))
	filled := b.op1("ConstantOfShape", nil, shape)
	exp := b.op1("Expand", nil, b.input("one", "float32[1,1,1,1]"), shape)
	size := b.op1("Size", nil, b.input("st3", "float32[3,4]"))
	want(t, b.infer(),
		shape, "int64[4]",
		n, "int64[]",
		target, "int64[2]",
		r, "float32[N,60]",
		hw, "int64[2]",
		flat, "float32[N,3,20]",
		filled, "float32[N,3,4,5]",
		exp, "float32[N,3,4,5]",
		size, "int64[]",
	)
}

func TestTransposeConcatFlatten(t *testing.T) {
	b := newBuilder(t, 13)
	x := b.input("x", "float32[N,3,H,W]")
	tr := b.op1("Transpose", attrs(aInts("perm", 0, 2, 3, 1)), x)
	rev := b.op1("Transpose", nil, x)
	cat := b.op1("Concat", attrs(aInt("axis", -1)), b.input("a", "float32[N,3,4]"), b.input("b", "float32[N,3,5]"))
	catSym := b.op1("Concat", attrs(aInt("axis", 0)), b.input("c", "float32[N,3]"), b.input("d", "float32[M,3]"))
	catZero := b.op1("Concat", attrs(aInt("axis", 0)), b.input("e", "float32[N,?]"), b.input("f", "float32[0,3]"))
	fl1 := b.op1("Flatten", nil, b.input("g", "float32[N,3,4,5]"))
	fl2 := b.op1("Flatten", attrs(aInt("axis", 2)), b.input("h", "float32[N,3,4,5]"))
	fl0 := b.op1("Flatten", attrs(aInt("axis", 0)), b.input("i", "float32[2,3]"))
	flNeg := b.op1("Flatten", attrs(aInt("axis", -1)), b.input("j", "float32[2,3,4]"))
	want(t, b.infer(),
		tr, "float32[N,H,W,3]",
		rev, "float32[W,H,3,N]",
		cat, "float32[N,3,9]",
		catSym, "float32[?,3]",
		catZero, "float32[N,3]",
		fl1, "float32[N,60]",
		fl2, "float32[?,20]",
		fl0, "float32[1,6]",
		flNeg, "float32[6,4]",
	)
}

func TestSqueezeUnsqueeze(t *testing.T) {
	// Opset 11: axes are attributes.
	b := newBuilder(t, 11)
	sq := b.op1("Squeeze", attrs(aInts("axes", 1)), b.input("x", "float32[N,1,3]"))
	sqAll := b.op1("Squeeze", nil, b.input("y", "float32[1,3,1,2]"))
	sqSym := b.op1("Squeeze", nil, b.input("z", "float32[N,1,3]"))
	un := b.op1("Unsqueeze", attrs(aInts("axes", 0, 3)), b.input("u", "float32[3,4]"))
	want(t, b.infer(), sq, "float32[N,3]", sqAll, "float32[3,2]", sqSym, "float32[*]", un, "float32[1,3,4,1]")

	// Opset 13: axes are an input.
	b = newBuilder(t, 13)
	sq = b.op1("Squeeze", nil, b.input("x", "float32[N,1,3]"), b.ints("a", -2))
	un = b.op1("Unsqueeze", nil, b.input("u", "float32[3,4]"), b.ints("b", -1, 0))
	unDyn := b.op1("Unsqueeze", nil, b.input("v", "float32[3,4]"), b.input("dyn", "int64[2]"))
	want(t, b.infer(), sq, "float32[N,3]", un, "float32[1,3,4,1]", unDyn, "float32[?,?,?,?]")
}

func TestSlice(t *testing.T) {
	// Opset 9: bounds are attributes.
	b := newBuilder(t, 9)
	old := b.op1("Slice", attrs(aInts("starts", 1), aInts("ends", 1000), aInts("axes", 1)), b.input("x", "float32[N,10]"))
	want(t, b.infer(), old, "float32[N,9]")

	b = newBuilder(t, 13)
	x := b.input("x", "float32[N,10,H]")
	all := b.op1("Slice", nil, x, b.ints("s0", 0), b.ints("e0", maxInt64), b.ints("a0", 2))
	rev := b.op1("Slice", nil, x, b.ints("s1", -1), b.ints("e1", -maxInt64), b.ints("a1", 1), b.ints("st1", -1))
	step := b.op1("Slice", nil, x, b.ints("s2", 0), b.ints("e2", 10), b.ints("a2", -2), b.ints("st2", 3))
	out := b.op1("Slice", nil, x, b.ints("s3", 20), b.ints("e3", 30), b.ints("a3", 1))
	neg := b.op1("Slice", nil, x, b.ints("s4", -4), b.ints("e4", -1), b.ints("a4", 1))
	noAxes := b.op1("Slice", nil, b.input("y", "float32[6,7]"), b.ints("s5", 1, 2), b.ints("e5", 3, 7))
	dyn := b.op1("Slice", nil, x, b.input("ds", "int64[1]"), b.ints("e6", 5), b.ints("a6", 1))
	want(t, b.infer(),
		all, "float32[N,10,H]",
		rev, "float32[N,10,H]",
		step, "float32[N,4,H]",
		out, "float32[N,0,H]",
		neg, "float32[N,3,H]",
		noAxes, "float32[2,5]",
		dyn, "float32[N,?,H]",
	)
}

func TestGather(t *testing.T) {
	b := newBuilder(t, 13)
	x := b.input("x", "float32[N,5,6]")
	g := b.op1("Gather", attrs(aInt("axis", 1)), x, b.input("i", "int64[2,3]"))
	g0 := b.op1("Gather", attrs(aInt("axis", -2)), x, b.scalar("s", 1))
	ge := b.op1("GatherElements", nil, x, b.input("ie", "int64[N,2,6]"))
	gnd := b.op1("GatherND", nil, b.input("d", "float32[2,3,4]"), b.input("ind", "int64[5,2]"))
	want(t, b.infer(),
		g, "float32[N,2,3,6]",
		g0, "float32[N,6]",
		ge, "float32[N,2,6]",
		gnd, "float32[5,4]",
	)
}

func TestResize(t *testing.T) {
	b := newBuilder(t, 13)
	x := b.input("x", "float32[N,3,10,10]")
	scaled := b.op1("Resize", nil, x, nil, b.floats("sc", 1, 1, 1.5, 2))
	sized := b.op1("Resize", nil, x, b.floats("roi"), b.floats("empty"), b.ints("sz", 1, 3, 7, 9))
	odd := b.op1("Resize", nil, b.input("y", "float32[1,1,5,5]"), nil, b.floats("sc2", 1, 1, 0.5, 0.3))
	want(t, b.infer(), scaled, "float32[N,3,15,20]", sized, "float32[1,3,7,9]", odd, "float32[1,1,2,1]")

	b = newBuilder(t, 10)
	r10 := b.op1("Resize", nil, b.input("x", "float32[1,3,4,4]"), b.floats("sc", 1, 1, 2, 2))
	want(t, b.infer(), r10, "float32[1,3,8,8]")

	b = newBuilder(t, 7)
	up := b.op1("Upsample", attrs(aFloats("scales", 1, 1, 2, 3)), b.input("x", "float32[N,3,4,4]"))
	want(t, b.infer(), up, "float32[N,3,8,12]")
}

func TestPadSplitTileExpand(t *testing.T) {
	b := newBuilder(t, 13)
	x := b.input("x", "float32[N,3,8,8]")
	pad := b.op1("Pad", nil, x, b.ints("p", 0, 0, 1, 2, 0, 0, 3, 4))
	split := b.op("Split", 2, attrs(aInt("axis", 1)), b.input("s", "float32[N,5]"), b.ints("sp", 2, 3))
	even := b.op("Split", 3, nil, b.input("e", "float32[6,N]"))
	tile := b.op1("Tile", nil, b.input("t", "float32[N,3]"), b.ints("r", 2, 1))
	tileS := b.op1("Tile", nil, b.input("t2", "float32[2,3]"), b.ints("r2", 2, 2))
	expand := b.op1("Expand", nil, b.input("ex", "float32[3,1]"), b.ints("es", 2, 1, 4))
	want(t, b.infer(),
		pad, "float32[N,3,12,14]",
		split[0], "float32[N,2]", split[1], "float32[N,3]",
		even[0], "float32[2,N]", even[2], "float32[2,N]",
		tile, "float32[?,3]",
		tileS, "float32[4,6]",
		expand, "float32[2,3,4]",
	)

	// Opset 2-10: pads and split are attributes.
	b = newBuilder(t, 10)
	pad = b.op1("Pad", attrs(aInts("pads", 1, 0, 1, 0)), b.input("x", "float32[2,N]"))
	split = b.op("Split", 2, attrs(aInts("split", 1, 4)), b.input("s", "float32[5]"))
	want(t, b.infer(), pad, "float32[4,N]", split[0], "float32[1]", split[1], "float32[4]")

	// Opset 18: num_outputs splits unevenly.
	b = newBuilder(t, 18)
	split = b.op("Split", 3, attrs(aInt("num_outputs", 3)), b.input("s", "float32[7]"))
	want(t, b.infer(), split[0], "float32[3]", split[1], "float32[3]", split[2], "float32[1]")
}

func TestReductions(t *testing.T) {
	b := newBuilder(t, 13)
	x := b.input("x", "float32[N,3,4]")
	mean := b.op1("ReduceMean", attrs(aInts("axes", -1), aInt("keepdims", 0)), x)
	sum := b.op1("ReduceSum", nil, x, b.ints("a", 1))
	sumAll := b.op1("ReduceSum", attrs(aInt("keepdims", 0)), x)
	noop := b.op1("ReduceSum", attrs(aInt("noop_with_empty_axes", 1)), x)
	sumDyn := b.op1("ReduceSum", nil, x, b.input("dyn", "int64[1]"))
	arg := b.op1("ArgMax", attrs(aInt("axis", 1), aInt("keepdims", 0)), x)
	top := b.op("TopK", 2, nil, x, b.ints("k", 2))
	want(t, b.infer(),
		mean, "float32[N,3]",
		sum, "float32[N,1,4]",
		sumAll, "float32[]",
		noop, "float32[N,3,4]",
		sumDyn, "float32[?,?,?]",
		arg, "int64[N,4]",
		top[0], "float32[N,3,2]",
		top[1], "int64[N,3,2]",
	)

	// Opset 18: every reduction takes axes as an input.
	b = newBuilder(t, 18)
	mx := b.op1("ReduceMax", nil, b.input("x", "float32[N,3,4]"), b.ints("a", 0, 2))
	all := b.op1("ReduceMin", nil, b.input("y", "float32[2,3]"))
	want(t, b.infer(), mx, "float32[1,3,1]", all, "float32[1,1]")
}

func TestQuantizeAndTensorOps(t *testing.T) {
	b := newBuilder(t, 15)
	x := b.input("x", "float32[N,4]")
	scale := b.input("scale", "float32[]")
	q8 := b.op1("QuantizeLinear", nil, x, scale, b.input("zp", "int8[]"))
	qu := b.op1("QuantizeLinear", nil, x, scale)
	dq := b.op1("DequantizeLinear", nil, q8, scale, b.input("zp2", "int8[]"))
	cst := b.op1("Constant", attrs(aInts("value_ints", 1, 2, 3)))
	tn, _ := graph.NewFloat32Tensor("v", []int64{2, 2}, []float32{1, 2, 3, 4})
	cstT := b.op1("Constant", attrs(aTensor("value", tn)))
	sh := b.op1("Shape", attrs(aInt("start", 1)), x)
	rng := b.op1("Range", nil, b.scalar("s", 0), b.scalar("l", 10), b.scalar("d", 3))
	nz := b.op1("NonZero", nil, x)
	want(t, b.infer(),
		q8, "int8[N,4]",
		qu, "uint8[N,4]",
		dq, "float32[N,4]",
		cst, "int64[3]",
		cstT, "float32[2,2]",
		sh, "int64[1]",
		rng, "int64[4]",
		nz, "int64[2,?]",
	)
}

// TestDeclarations: declared types fill in what inference cannot know,
// inference refines declarations, and contradictions are reported with
// the declaration kept.
func TestDeclarations(t *testing.T) {
	b := newBuilder(t, 17)
	x := b.input("x", "float32[N,3,8,8]")
	w := b.weights("w", 4, 3, 3, 3)
	refined := b.op1("Conv", attrs(aInts("pads", 1, 1, 1, 1)), x, w)
	refined.Type = parseType(t, "float32[?,?,H,W]")
	wrong := b.op1("Relu", nil, refined)
	wrong.Type = parseType(t, "float32[N,4,9,9]")
	custom := b.op1("MyOp", nil, wrong)
	custom.Type = parseType(t, "float32[N,7]")
	after := b.op1("Relu", nil, custom)
	unknown := b.op1("MyOp", nil, x)
	b.Graph.ValueInfo = append(b.Graph.ValueInfo, refined, wrong, custom)
	res := b.infer()
	want(t, res,
		refined, "float32[N,4,8,8]",
		wrong, "float32[N,4,9,9]",
		custom, "float32[N,7]",
		after, "float32[N,7]",
		unknown, "unknown",
	)
	if len(res.Conflicts) != 1 || res.Conflicts[0].Value != wrong {
		t.Fatalf("conflicts: %v", res.Conflicts)
	}
	if got := typeString(res.Inferred.Get(wrong)); got != "float32[N,4,8,8]" {
		t.Errorf("inferred for the conflict: %s", got)
	}
	c := res.Counts
	if c.Values != 5 || c.Static != 0 || c.Partial != 4 || c.Unknown != 1 {
		t.Errorf("counts %+v", c)
	}
}

func TestCounts(t *testing.T) {
	b := newBuilder(t, 17)
	x := b.input("x", "float32[2,3]")
	b.op1("Relu", nil, x)
	b.op1("Relu", nil, b.input("y", "float32[N,3]"))
	b.op1("Foo", nil, x)
	c := b.infer().Counts
	if c.Values != 3 || c.Static != 1 || c.Partial != 1 || c.Unknown != 1 {
		t.Errorf("counts %+v", c)
	}
}

// TestIf infers both branches (which read outer values); an output is
// what the branches agree on.
func TestIf(t *testing.T) {
	b := newBuilder(t, 17)
	x := b.input("x", "float32[N,3]")
	outs := b.op("If", 2, nil, b.input("cond", "bool[]"))
	node := outs[0].Producer()
	branch := func(name string, ops ...string) *graph.Graph {
		g := graph.NewGraph(name)
		g.Parent, g.Owner = b.Graph, node
		for _, op := range ops {
			v, err := g.NewValue(name + "_" + op)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g.AddNode(op, []*graph.Value{x}, []*graph.Value{v}); err != nil {
				t.Fatal(err)
			}
			g.Outputs = append(g.Outputs, v)
		}
		return g
	}
	then := branch("then", "Relu", "Transpose")
	els := branch("else", "Neg", "Identity")
	node.SetAttr(&graph.Attr{Name: "then_branch", Type: graph.AttrGraph, Graph: then})
	node.SetAttr(&graph.Attr{Name: "else_branch", Type: graph.AttrGraph, Graph: els})
	res := b.infer()
	want(t, res,
		outs[0], "float32[N,3]",
		outs[1], "float32[?,?]",
		then.Outputs[1], "float32[3,N]",
		els.Outputs[0], "float32[N,3]",
	)
	if res.Counts.Values != 6 {
		t.Errorf("counts %+v: want the 4 branch values and the 2 outputs", res.Counts)
	}
}

func TestOtherDomains(t *testing.T) {
	b := newBuilder(t, 17)
	b.Model.Opsets = append(b.Model.Opsets, graph.OpsetImport{Domain: "com.microsoft", Version: 1}, graph.OpsetImport{Domain: "custom", Version: 1})
	x := b.input("x", "float32[N,3,8,8]")
	fused := b.op1("FusedConv", attrs(aString("activation", "Relu"), aInts("pads", 1, 1, 1, 1)), x, b.weights("w", 4, 3, 3, 3))
	fused.Producer().Domain = "com.microsoft"
	relu := b.op1("Relu", nil, x)
	relu.Producer().Domain = "custom"
	// What the transformer fusions write for ONNX Runtime alone.
	h := b.input("h", "float32[N,S,8]")
	var ms []*graph.Value
	for _, op := range []string{"Gelu", "FastGelu", "SkipLayerNormalization"} {
		ins := []*graph.Value{h}
		if op == "SkipLayerNormalization" {
			ins = append(ins, h, b.weights("g", 8))
		}
		v := b.op1(op, nil, ins...)
		v.Producer().Domain = "com.microsoft"
		ms = append(ms, v)
	}
	want(t, b.infer(), fused, "float32[N,4,8,8]", relu, "unknown",
		ms[0], "float32[N,S,8]", ms[1], "float32[N,S,8]", ms[2], "float32[N,S,8]")
}

func TestOldConcatAxis(t *testing.T) {
	b := newBuilder(t, 3)
	cat := b.op1("Concat", nil, b.input("a", "float32[2,3]"), b.input("b", "float32[2,4]"))
	want(t, b.infer(), cat, "float32[2,7]")
}

// TestHostileShapes: absurd declarations and constants must not panic or
// allocate what they claim.
func TestHostileShapes(t *testing.T) {
	b := newBuilder(t, 13)
	huge := b.input("huge", "int64[1000000000000]")
	r := b.op1("Reshape", nil, b.input("x", "float32[2,3]"), huge)
	cs := b.op1("ConstantOfShape", nil, b.ints("neg", -5))
	sl := b.op1("Slice", nil, b.input("y", "float32[10]"), b.ints("s", 5), b.ints("e", 0), b.ints("a", 0), b.ints("st", -1<<63))
	rs := b.op1("Resize", nil, b.input("z", "float32[1,1,4,4]"), nil, b.floats("sc", 1, 1, -1, 1e30))
	want(t, b.infer(), r, "float32[*]", cs, "float32[?]", sl, "float32[1]", rs, "float32[1,1,?,?]")
}
