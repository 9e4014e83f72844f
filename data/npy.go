package data

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/optc-dev/optc/graph"
	"github.com/optc-dev/optc/internal/atomicfile"
)

const npyMagic = "\x93NUMPY"

// maxNpyHeader bounds the header (numpy itself refuses more than 10,000
// bytes unless told otherwise).
const maxNpyHeader = 1 << 20

// npyHeader is a parsed .npy header.
type npyHeader struct {
	descr   string
	dtype   graph.DataType
	fortran bool
	shape   []int64
	dataOff int64 // where the data starts, from the start of the .npy bytes
	size    int64 // data bytes the shape calls for
}

// sampleBytes is the size of one sample (axis 0 dropped).
func (h *npyHeader) sampleBytes() int64 {
	if len(h.shape) == 0 {
		return h.size
	}
	n := int64(1)
	for _, d := range h.shape[1:] {
		n *= d // cannot overflow: the whole size was checked
	}
	b, _ := h.dtype.ByteSize(n)
	return b
}

// readNpyHeader reads and checks a .npy header from r, which holds avail
// bytes in all (the header cannot be larger). The shape's data size is
// checked for overflow, not against avail: callers report truncation.
func readNpyHeader(r io.Reader, avail int64) (*npyHeader, error) {
	var pre [10]byte
	if _, err := io.ReadFull(r, pre[:8]); err != nil {
		return nil, fmt.Errorf("not a .npy file: %d bytes, shorter than the magic string", max(avail, 0))
	}
	if string(pre[:6]) != npyMagic {
		return nil, fmt.Errorf("not a .npy file (it does not start with \\x93NUMPY)")
	}
	major, minor := pre[6], pre[7]
	var hlen, prefix int64
	switch major {
	case 1:
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return nil, fmt.Errorf("bad .npy header: the file ends inside the header length")
		}
		hlen, prefix = int64(binary.LittleEndian.Uint16(pre[8:10])), 10
	case 2, 3:
		var l [4]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return nil, fmt.Errorf("bad .npy header: the file ends inside the header length")
		}
		hlen, prefix = int64(binary.LittleEndian.Uint32(l[:])), 12
	default:
		return nil, fmt.Errorf("unsupported .npy format version %d.%d (want 1.0, 2.0 or 3.0)", major, minor)
	}
	if hlen > maxNpyHeader || hlen > avail-prefix {
		return nil, fmt.Errorf("bad .npy header: header length %d exceeds the file (%d bytes)", hlen, avail)
	}
	text := make([]byte, hlen)
	if _, err := io.ReadFull(r, text); err != nil {
		return nil, fmt.Errorf("bad .npy header: the file ends inside the header")
	}
	h, err := parseNpyDict(string(text))
	if err != nil {
		return nil, fmt.Errorf("bad .npy header %q: %w", strings.TrimSpace(string(text)), err)
	}
	h.dataOff = prefix + hlen
	if h.dtype, err = parseDescr(h.descr); err != nil {
		return nil, err
	}
	if h.fortran {
		return nil, fmt.Errorf("the array is in Fortran order (fortran_order: True); save it in C order (numpy.ascontiguousarray)")
	}
	n := int64(1)
	for _, d := range h.shape {
		if d < 0 {
			return nil, fmt.Errorf("bad .npy header: negative dimension in shape %v", h.shape)
		}
		if d != 0 && n > math.MaxInt64/d {
			return nil, fmt.Errorf("bad .npy header: shape %v is too large", h.shape)
		}
		n *= d
	}
	size, ok := h.dtype.ByteSize(n)
	if !ok {
		return nil, fmt.Errorf("bad .npy header: shape %v is too large", h.shape)
	}
	h.size = size
	return h, nil
}

// parseDescr maps a numpy type string to an element type. Big-endian data
// of more than one byte is refused.
func parseDescr(s string) (graph.DataType, error) {
	if len(s) < 2 {
		return 0, fmt.Errorf("unsupported .npy dtype %q", s)
	}
	order, code := s[0], s[1:]
	var dt graph.DataType
	switch code {
	case "f2":
		dt = graph.Float16
	case "f4":
		dt = graph.Float
	case "f8":
		dt = graph.Double
	case "i1":
		dt = graph.Int8
	case "i2":
		dt = graph.Int16
	case "i4":
		dt = graph.Int32
	case "i8":
		dt = graph.Int64
	case "u1":
		dt = graph.Uint8
	case "u2":
		dt = graph.Uint16
	case "u4":
		dt = graph.Uint32
	case "u8":
		dt = graph.Uint64
	case "b1":
		dt = graph.Bool
	default:
		return 0, fmt.Errorf("unsupported .npy dtype %q (want one of <f2 <f4 <f8 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1)", s)
	}
	switch {
	case order == '<', dt.BitSize() == 8 && (order == '|' || order == '>' || order == '='):
		return dt, nil
	case order == '>':
		return 0, fmt.Errorf("big-endian .npy dtype %q is not supported; convert it with arr.astype('<%s')", s, code)
	}
	return 0, fmt.Errorf("unsupported .npy dtype %q (byte order %q; want '<')", s, order)
}

// descrOf is the numpy type string WriteNpy writes for dt (numpy's own
// dtype.str).
func descrOf(dt graph.DataType) (string, bool) {
	switch dt {
	case graph.Float16:
		return "<f2", true
	case graph.Float:
		return "<f4", true
	case graph.Double:
		return "<f8", true
	case graph.Int8:
		return "|i1", true
	case graph.Int16:
		return "<i2", true
	case graph.Int32:
		return "<i4", true
	case graph.Int64:
		return "<i8", true
	case graph.Uint8:
		return "|u1", true
	case graph.Uint16:
		return "<u2", true
	case graph.Uint32:
		return "<u4", true
	case graph.Uint64:
		return "<u8", true
	case graph.Bool:
		return "|b1", true
	}
	return "", false
}

// parseNpyDict parses the Python dict literal of a .npy header:
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }.
func parseNpyDict(s string) (*npyHeader, error) {
	p := &pyLexer{s: s}
	if !p.eat('{') {
		return nil, errors.New("want a dict")
	}
	h := &npyHeader{}
	seen := map[string]bool{}
	for !p.eat('}') {
		key, ok := p.str()
		if !ok {
			return nil, fmt.Errorf("want a string key at offset %d", p.i)
		}
		if seen[key] {
			return nil, fmt.Errorf("key %q appears twice", key)
		}
		seen[key] = true
		if !p.eat(':') {
			return nil, fmt.Errorf("want ':' after %q", key)
		}
		switch key {
		case "descr":
			if h.descr, ok = p.str(); !ok {
				return nil, errors.New("descr is not a simple type string (structured dtypes are not supported)")
			}
		case "fortran_order":
			switch p.ident() {
			case "True":
				h.fortran = true
			case "False":
			default:
				return nil, errors.New("fortran_order is not True or False")
			}
		case "shape":
			if h.shape, ok = p.tuple(); !ok {
				return nil, errors.New("shape is not a tuple of integers")
			}
		default:
			return nil, fmt.Errorf("unknown key %q", key)
		}
		if !p.eat(',') {
			if !p.eat('}') {
				return nil, fmt.Errorf("want ',' or '}' at offset %d", p.i)
			}
			break
		}
	}
	p.space()
	if p.i != len(p.s) {
		return nil, fmt.Errorf("unexpected text after the dict at offset %d", p.i)
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return nil, fmt.Errorf("key %q is missing", k)
		}
	}
	return h, nil
}

// pyLexer reads the few Python literals .npy headers use.
type pyLexer struct {
	s string
	i int
}

func (p *pyLexer) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *pyLexer) eat(c byte) bool {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *pyLexer) str() (string, bool) {
	p.space()
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", false
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", false
	}
	v := p.s[p.i+1 : p.i+1+end]
	if strings.IndexByte(v, '\\') >= 0 {
		return "", false
	}
	p.i += end + 2
	return v, true
}

func (p *pyLexer) ident() string {
	p.space()
	j := p.i
	for j < len(p.s) && (p.s[j] >= 'A' && p.s[j] <= 'Z' || p.s[j] >= 'a' && p.s[j] <= 'z') {
		j++
	}
	v := p.s[p.i:j]
	p.i = j
	return v
}

// tuple reads (), (n,) or (n, m, ...), allowing Python 2's L suffix.
func (p *pyLexer) tuple() ([]int64, bool) {
	if !p.eat('(') {
		return nil, false
	}
	out := []int64{}
	for !p.eat(')') {
		p.space()
		j := p.i
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		if j == p.i || j-p.i > 19 {
			return nil, false
		}
		v, err := strconv.ParseInt(p.s[p.i:j], 10, 64)
		if err != nil {
			return nil, false
		}
		p.i = j
		if p.i < len(p.s) && p.s[p.i] == 'L' {
			p.i++
		}
		out = append(out, v)
		if !p.eat(',') {
			if !p.eat(')') {
				return nil, false
			}
			break
		}
	}
	return out, true
}

// npyHeaderBytes returns the header numpy writes for an array of type dt
// and shape dims (numpy.lib.format, version 1.0 when it fits): the keys in
// sorted order, spare room for axis 0 to grow, padded with spaces to a
// multiple of 64 bytes and ended by a newline.
func npyHeaderBytes(dt graph.DataType, dims []int64) ([]byte, error) {
	descr, ok := descrOf(dt)
	if !ok {
		return nil, fmt.Errorf("cannot write %s as .npy", dt)
	}
	var shape strings.Builder
	shape.WriteByte('(')
	for i, d := range dims {
		if i > 0 {
			shape.WriteString(", ")
		}
		shape.WriteString(strconv.FormatInt(d, 10))
	}
	if len(dims) == 1 {
		shape.WriteByte(',')
	}
	shape.WriteByte(')')
	dict := "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape.String() + ", }"
	if len(dims) > 0 {
		dict += strings.Repeat(" ", max(0, 21-len(strconv.FormatInt(dims[0], 10))))
	}
	hlen := len(dict) + 1
	var buf bytes.Buffer
	buf.WriteString(npyMagic)
	if pad := 64 - (10+hlen)%64; hlen+pad <= math.MaxUint16 {
		buf.Write([]byte{1, 0})
		buf.Write(binary.LittleEndian.AppendUint16(nil, uint16(hlen+pad)))
		buf.WriteString(dict)
		buf.WriteString(strings.Repeat(" ", pad))
	} else {
		pad := 64 - (12+hlen)%64
		buf.Write([]byte{2, 0})
		buf.Write(binary.LittleEndian.AppendUint32(nil, uint32(hlen+pad)))
		buf.WriteString(dict)
		buf.WriteString(strings.Repeat(" ", pad))
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// ReadNpy reads a whole .npy file (labels, small files). The tensor is named
// after the file, without the extension.
func ReadNpy(path string) (*graph.Tensor, error) {
	f, size, err := openSized(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	h, err := readNpyHeader(io.NewSectionReader(f, 0, size), size)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if avail := size - h.dataOff; h.size > avail {
		return nil, truncatedError(path, h, avail)
	}
	buf := make([]byte, h.size)
	if _, err := f.ReadAt(buf, h.dataOff); err != nil && !(errors.Is(err, io.EOF) && h.size == 0) {
		return nil, fmt.Errorf("read %s: %w", path, unwrapPathError(err))
	}
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	return graph.NewTensor(name, h.dtype, h.shape, buf)
}

// truncatedError reports data that stops short of what the header says,
// naming the first incomplete sample.
func truncatedError(where string, h *npyHeader, avail int64) error {
	avail = max(avail, 0)
	if len(h.shape) == 0 {
		return fmt.Errorf("%s: truncated: %s needs %d data bytes, the file has %d", where, dimsString(h.dtype, h.shape), h.size, avail)
	}
	sample := int64(0)
	if sb := h.sampleBytes(); sb > 0 {
		sample = avail / sb
	}
	return fmt.Errorf("%s: truncated: %s needs %d data bytes, the file has %d; the data stops in sample %d of %d", where, dimsString(h.dtype, h.shape), h.size, avail, sample, h.shape[0])
}

// WriteNpy writes t as a .npy file (format version 1.0, the header numpy
// writes, little-endian data) atomically: a temporary file in the same
// folder is renamed into place when complete. The same tensor always gives
// the same bytes.
func WriteNpy(path string, t *graph.Tensor) error {
	if _, err := t.NumElements(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	hdr, err := npyHeaderBytes(t.DType, t.Dims)
	if err != nil {
		return fmt.Errorf("write %s: tensor %q: %w", path, t.Name, err)
	}
	data, err := t.Bytes()
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if want := t.ByteSize(); int64(len(data)) != want {
		return fmt.Errorf("write %s: tensor %q has %d bytes of data, %s needs %d", path, t.Name, len(data), dimsString(t.DType, t.Dims), want)
	}
	if err := atomicfile.Write(path, hdr, data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
