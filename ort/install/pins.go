package install

// DefaultVersion is the ONNX Runtime release optc is built and tested
// against; onnxruntime_go v1.27.0 needs C API 24, so at least 1.24.
const DefaultVersion = "1.24.1"

// release is what optc knows about one onnxruntime-node tarball: its
// digest and size, and per platform where the library is inside it and
// its digest. The values were measured by downloading the tarball from
// the public npm registry once and hashing it and each library.
type release struct {
	tarballSHA256 string
	tarballSize   int64
	libraries     map[Platform]library
}

// library is one platform's shared library inside the tarball.
type library struct {
	member string // path inside the tarball
	name   string // file name in the cache, the one dlopen is given
	sha256 string
	size   int64
}

// missing names platforms a tarball does not carry, with the reason, so
// that the error says more than "unsupported".
type missing struct{ why string }

var releases = map[string]release{
	"1.24.1": {
		tarballSHA256: "57181cf6e6e711b155c5b942d591fd63ded0b5de5c4922d51fd994e7f6ac2772",
		tarballSize:   85811498,
		libraries: map[Platform]library{
			{"linux", "amd64"}: {
				member: "package/bin/napi-v6/linux/x64/libonnxruntime.so.1",
				name:   "libonnxruntime.so.1",
				sha256: "53ef1ac028dd1b05554b8da28d9159eb3876f99868193d2aaa6e67f0243c23d4",
				size:   35057880,
			},
			{"linux", "arm64"}: {
				member: "package/bin/napi-v6/linux/arm64/libonnxruntime.so.1",
				name:   "libonnxruntime.so.1",
				sha256: "7954e8bdedb497f830c6a679e818d98399b7f4d81ade1126c3e0be74d28111ab",
				size:   18559840,
			},
			{"darwin", "arm64"}: {
				member: "package/bin/napi-v6/darwin/arm64/libonnxruntime.1.24.1.dylib",
				name:   "libonnxruntime.1.24.1.dylib",
				sha256: "7ad6507ad64d3b02aebfae6380c024ff188939cd8a7a493ec18028e034c8275c",
				size:   35880440,
			},
		},
	},
}

// notShipped explains the platforms optc supports that no tarball of a
// usable version carries.
var notShipped = map[Platform]missing{
	// onnxruntime-node 1.23.2 still has darwin/x64; 1.24.1, 1.24.3, 1.27.0
	// and 1.30.0 do not, and onnxruntime_go v1.27.0 cannot use 1.23.
	{"darwin", "amd64"}: {"the npm package ships no macOS x86-64 library from 1.24 on (1.23.2 was the last), and optc needs >= 1.24"},
}
