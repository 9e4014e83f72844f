package graph

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/optc-dev/optc/onnxpb"
)

// ParseTensor decodes a serialized TensorProto, such as the input_0.pb and
// output_0.pb files of the ONNX test format. External data is refused.
func ParseTensor(b []byte) (t *Tensor, err error) {
	defer recoverInvalid("tensor", &t, &err)
	tp, raw, err := unmarshalTensor(b)
	if err != nil {
		return nil, fmt.Errorf("not a valid ONNX tensor: %w", err)
	}
	if tp.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
		return nil, fmt.Errorf("tensor %q: external data is not supported in a tensor file", tp.GetName())
	}
	t, err = decodeTensor(tp, raw, nil)
	if err != nil {
		return nil, err
	}
	if _, err := t.NumElements(); err != nil {
		return nil, err
	}
	if t.DType != String {
		data, err := t.Bytes()
		if err != nil {
			return nil, err
		}
		if want, ok := t.DType.ByteSize(mustElements(t)); !ok || int64(len(data)) != want {
			return nil, fmt.Errorf("tensor %q: %d bytes of data for %s%v (want %d)", t.Name, len(data), t.DType, t.Dims, want)
		}
	}
	return t, nil
}

// MarshalTensor serializes t as a TensorProto with its data inline.
func MarshalTensor(t *Tensor) ([]byte, error) {
	tp, raw, err := (&encoder{}).tensor(t)
	if err != nil {
		return nil, err
	}
	tp.RawData = raw
	return proto.MarshalOptions{Deterministic: true}.Marshal(tp)
}
