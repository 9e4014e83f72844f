package graph

import (
	"os"
	"sync"
)

// sharedMaps maps each side file once per process however many loaded
// models read it (optc parses the same large model many times: copies for
// calibration, quantization, checks), so its pages are mapped, and counted
// in the resident set, once. A file replaced on disk gets a new mapping;
// models holding the old one keep it until they are closed.
var sharedMaps = struct {
	sync.Mutex
	m map[string]*sharedMap
}{m: map[string]*sharedMap{}}

type sharedMap struct {
	data  []byte
	unmap func() error
	info  os.FileInfo
	refs  int
}

// mapShared returns path's bytes and a function that releases this hold
// on them.
func mapShared(path string) ([]byte, func() error, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	sharedMaps.Lock()
	defer sharedMaps.Unlock()
	s, ok := sharedMaps.m[path]
	if !ok || !os.SameFile(s.info, info) || s.info.Size() != info.Size() || !s.info.ModTime().Equal(info.ModTime()) {
		data, unmap, err := mapFile(path)
		if err != nil {
			return nil, nil, err
		}
		s = &sharedMap{data: data, unmap: unmap, info: info}
		sharedMaps.m[path] = s
	}
	s.refs++
	return s.data, func() error {
		sharedMaps.Lock()
		defer sharedMaps.Unlock()
		if s.refs--; s.refs > 0 {
			return nil
		}
		if sharedMaps.m[path] == s {
			delete(sharedMaps.m, path)
		}
		return s.unmap()
	}, nil
}
