package data

import (
	"archive/zip"
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// maxDeflateRatio bounds the uncompressed size a deflated member may claim
// (deflate cannot compress better than about 1032:1), so a forged size
// cannot make a batch allocation exceed what the file can hold.
const maxDeflateRatio = 1100

// openNpz opens a .npz file: a zip of <input>.npy members, one per input.
// Stored members (numpy.savez) are read by offset, deflated ones
// (numpy.savez_compressed) as streams, a batch at a time.
func openNpz(path string, inputs []Input, opts Options) (Source, error) {
	f, size, err := openSized(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	zr, err := zip.NewReader(f, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		f.Close()
		return nil, fmt.Errorf("%s: not a valid .npz (zip) file: %w", path, err)
	}
	byKey := map[string]*zip.File{}
	var keys []string
	for _, zf := range zr.File {
		key := strings.TrimSuffix(zf.Name, ".npy")
		if other, dup := byKey[key]; dup {
			f.Close()
			return nil, fmt.Errorf("%s: members %q and %q both give key %q", path, other.Name, zf.Name, key)
		}
		byKey[key] = zf
		keys = append(keys, key)
	}
	slices.Sort(keys)
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = strconv.Quote(k)
		if byKey[k].Name == k {
			quoted[i] += " (member " + strconv.Quote(k) + ", not a .npy)"
		}
	}
	held := strings.Join(quoted, ", ")
	if len(keys) == 0 {
		held = "none"
	}
	var fed []Input
	for _, in := range inputs {
		if _, ok := byKey[in.Name]; ok || !fillable(in, opts) {
			fed = append(fed, in)
		}
	}
	whole := inputs
	inputs = fed
	for _, in := range inputs {
		if zf, ok := byKey[in.Name]; !ok || zf.Name != in.Name+".npy" {
			f.Close()
			return nil, fmt.Errorf("%s: no member %q for input %q; the file holds keys: %s (inputs: %s)", path, in.Name+".npy", in.Name, held, inputNames(inputs))
		}
	}
	for _, k := range keys {
		if !slices.ContainsFunc(inputs, func(in Input) bool { return in.Name == k }) {
			f.Close()
			return nil, fmt.Errorf("%s: member %q matches no model input (inputs: %s)", path, byKey[k].Name, inputNames(whole))
		}
	}
	members := make([]*member, len(inputs))
	src := &sampleSource{members: members, closer: f}
	for i, in := range inputs {
		zf := byKey[in.Name]
		m, err := openZipMember(path+": member "+zf.Name, in.Name, f, size, zf)
		if err != nil {
			src.Close()
			return nil, err
		}
		members[i] = m
	}
	return withFill(path, whole, fed, opts, func(fed []Input) (Source, error) {
		return newSampleSource(path, fed, members, opts, f)
	})
}

// openZipMember reads the .npy header of one member of a zip file.
func openZipMember(where, input string, f io.ReaderAt, fileSize int64, zf *zip.File) (*member, error) {
	label := memberLabel(where, input)
	if zf.UncompressedSize64 > math.MaxInt64 || zf.CompressedSize64 > math.MaxInt64 {
		return nil, fmt.Errorf("%s: implausible member size", label)
	}
	usize, csize := int64(zf.UncompressedSize64), int64(zf.CompressedSize64)
	if zf.Method == zip.Store {
		off, err := zf.DataOffset()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		if csize != usize {
			return nil, fmt.Errorf("%s: stored member has compressed size %d but uncompressed size %d", label, csize, usize)
		}
		if off < 0 || off > fileSize || usize > fileSize-off {
			return nil, fmt.Errorf("%s: truncated: the member needs %d bytes at offset %d, the file has %d", label, usize, off, fileSize)
		}
		return openMember(where, input, io.NewSectionReader(f, off, usize), usize)
	}
	if usize > csize*maxDeflateRatio+1<<16 {
		return nil, fmt.Errorf("%s: implausible uncompressed size %d for %d compressed bytes", label, usize, csize)
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	br := bufio.NewReaderSize(rc, 64<<10)
	h, err := readNpyHeader(br, usize)
	if err == nil {
		err = checkSampleHeader(label, h, usize)
	} else {
		err = fmt.Errorf("%s: %w", label, err)
	}
	if err != nil {
		rc.Close()
		return nil, err
	}
	return &member{where: where, label: label, hdr: h, sample: h.sampleBytes(), stream: br, closer: rc}, nil
}
