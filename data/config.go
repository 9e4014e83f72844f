package data

import (
	"github.com/optc-dev/optc/config"
)

// The build config's image section is data's: its defaults and rules
// live here, beside the image reader they configure.
func init() {
	config.Register(config.Owner{Name: "data", Section: "image", Defaults: configDefaults, Rules: configRules})
}

func configDefaults(c *config.Config) {
	c.Image.Layout, c.Image.Color = "NCHW", "rgb"
}

func configRules(c config.Config) []string {
	if n := len(c.Image.Size); n != 0 && n != 2 {
		return []string{"image.size: want [height, width]"}
	}
	if err := ConfigImage(c.Image).Validate(); err != nil {
		return []string{err.Error()}
	}
	return nil
}

// ConfigSpec is the input specification of a build config (shapes,
// batch_axes, values, ranges): what every stage of the build uses.
func ConfigSpec(c config.Config) Spec {
	s := Spec{Shapes: c.Shapes, BatchAxes: c.BatchAxes, Values: c.Values}
	for name, r := range c.Ranges {
		if len(r) == 2 {
			if s.Ranges == nil {
				s.Ranges = map[string][2]float64{}
			}
			s.Ranges[name] = [2]float64{r[0], r[1]}
		}
	}
	return s
}

// ConfigImage is a build config's image section as the image reader
// takes it.
func ConfigImage(i config.Image) ImageOptions {
	o := ImageOptions{Resize: i.Resize, Layout: i.Layout, Color: i.Color, Scale: i.Scale, Mean: i.Mean, Std: i.Std}
	if len(i.Size) == 2 {
		o.Height, o.Width = i.Size[0], i.Size[1]
	}
	return o
}
