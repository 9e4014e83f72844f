package config

import (
	"fmt"
	"slices"
)

// An Owner is the package that a section of the config, or some keys of
// one, belong to: calibrate owns calibration; ptq, placement and
// weightonly each own keys of quantize; a target owns its own section.
// config declares the sections and decodes them; their names, defaults
// and rules live with the owner, which registers them (Register) from its
// init: config, a leaf, imports none of them.
type Owner struct {
	Name    string // the owning package or target, for messages
	Section string // the section whose keys Rules checks
	// Defaults sets the owner's keys in Default.
	Defaults func(*Config)
	// Rules checks the owner's keys: one message per problem, naming the
	// key. optc quantize runs the calibration and quantize sections'
	// rules on its flags (ValidateQuantization).
	Rules func(Config) []string
	// Joins checks the rules that join the owner's keys with other
	// sections' (run by Validate only).
	Joins func(Config) []string
	// Words are, per path key ("quantize.placement"), the values that
	// are not paths ("auto").
	Words map[string][]string
	// New, for a section whose type is the owner's (a target's), is a
	// pointer to a new one holding the section's defaults: the config
	// holds it by name (SectionOf).
	New func() any
}

// ownedSections are the sections whose keys' defaults and rules are their
// owners': a program that validates a config without linking an owner
// would check nothing there, so Validate says so (unowned).
var ownedSections = []string{"image", "calibration", "prune", "quantize", "eval", "runtime"}

// sectionOrder is the order rules run in, so that Problems come in the
// same order whatever the order the owners registered in ("": the
// targets' sections, in build order).
var sectionOrder = []string{"calibration", "eval", "prune", "quantize", "runtime", "", "image"}

var owners []Owner

// Register adds an owner's defaults and rules to every config. A target
// registers through export/target.Register.
func Register(o Owner) {
	owners = append(owners, o)
	rank := func(o Owner) int {
		if i := slices.Index(sectionOrder, o.Section); i >= 0 {
			return i
		}
		return slices.Index(sectionOrder, "")
	}
	slices.SortStableFunc(owners, func(a, b Owner) int { return rank(a) - rank(b) })
}

// unowned names the owned sections no linked package owns.
func unowned() Problems {
	var p Problems
	for _, s := range ownedSections {
		if !slices.ContainsFunc(owners, func(o Owner) bool { return o.Section == s }) {
			p = append(p, fmt.Sprintf("%s: no package owns this section's rules in this program (link its owner)", s))
		}
	}
	return p
}

// Words are the values of a path key that are not paths: "random" for
// data, and what the key's owner registered.
func Words(key string) []string {
	var w []string
	for _, k := range pathKeys {
		if k.key == key {
			w = append(w, k.words...)
		}
	}
	for _, o := range owners {
		w = append(w, o.Words[key]...)
	}
	return w
}
