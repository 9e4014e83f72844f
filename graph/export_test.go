package graph

// SetProtobufLimit lowers the 2 GiB limit for a test, so that small models
// take the paths of large ones; the returned function restores it.
func SetProtobufLimit(n int64) (restore func()) {
	old := protobufLimit
	protobufLimit = n
	return func() { protobufLimit = old }
}
