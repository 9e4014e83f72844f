package graph

// SetProtobufLimit lowers the 2 GiB limit for a test, so that small models
// take the paths of large ones; the returned function restores it.
func SetProtobufLimit(n int64) (restore func()) {
	old := protobufLimit
	protobufLimit = n
	return func() { protobufLimit = old }
}

// AppendOutputBehindTheBack lists v as one more output of n without making
// n its producer: the state a buggy pass could leave, for Verify's tests.
func AppendOutputBehindTheBack(n *Node, v *Value) { n.outputs = append(n.outputs, v) }

// CorruptUses breaks v's use list the ways Verify must find: it names a
// node input that reads something else (stale), and a reader's own entry
// is gone (missing).
func CorruptUses(v *Value, stale, missing *Node) {
	v.uses = append(v.uses, Use{Node: stale, Index: 0})
	for i, u := range v.uses {
		if u.Node == missing {
			v.uses = append(v.uses[:i], v.uses[i+1:]...)
			break
		}
	}
}
