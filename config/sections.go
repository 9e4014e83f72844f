package config

import (
	"reflect"
	"strconv"
	"strings"
)

// A section whose type is its owner's (a target's tensorrt or triton
// section: Owner.New) is held by the config by name, not as a field:
// config cannot import the target that declares it. It is written and
// read in its place among the config's own keys (before gates) through
// wire, a struct built at run time from Config's fields and the owned
// sections' types, so that decoding stays strict and keeps its line
// numbers, and the JSON and YAML forms keep their order.

// SectionOf is c's section name, of the type its owner registered
// (Owner.New): nil when no owner registered it, or registered another
// type. It is what c holds, not a copy: copies of c share it, as they
// share c's maps.
func SectionOf[T any](c *Config, name string) *T {
	t, _ := c.section(name).(*T)
	return t
}

// section is c's section name (a pointer to its owner's type), made from
// the owner's defaults when c has none yet (a zero Config).
func (c *Config) section(name string) any {
	if s, ok := c.sections[name]; ok {
		return s
	}
	for _, o := range owners {
		if o.Section == name && o.New != nil {
			if c.sections == nil {
				c.sections = map[string]any{}
			}
			s := o.New()
			c.sections[name] = s
			return s
		}
	}
	return nil
}

// typedSections are the owners whose section is a type of their own, in
// registration order.
func typedSections() []Owner {
	var out []Owner
	for _, o := range owners {
		if o.New != nil {
			out = append(out, o)
		}
	}
	return out
}

// wireType is Config as written and read: its exported fields in order,
// with each owned section's type, keyed by its name, before Gates.
func wireType() reflect.Type {
	ct := reflect.TypeFor[Config]()
	var fields []reflect.StructField
	for i := range ct.NumField() {
		f := ct.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Name == "Gates" {
			for j, o := range typedSections() {
				fields = append(fields, reflect.StructField{Name: sectionField(j), Type: reflect.TypeOf(o.New()).Elem(),
					Tag: reflect.StructTag(`yaml:"` + o.Section + `" json:"` + o.Section + `"`)})
			}
		}
		fields = append(fields, reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag})
	}
	return reflect.StructOf(fields)
}

// sectionField is the wire struct's field name of the i-th owned section.
func sectionField(i int) string { return "Section" + strconv.Itoa(i) }

// wire is c as a wire struct (a pointer to it).
func (c *Config) wire() reflect.Value {
	w := reflect.New(wireType()).Elem()
	cv := reflect.ValueOf(c).Elem()
	for i := range cv.NumField() {
		if f := cv.Type().Field(i); f.IsExported() {
			w.FieldByName(f.Name).Set(cv.Field(i))
		}
	}
	for j, o := range typedSections() {
		w.FieldByName(sectionField(j)).Set(reflect.ValueOf(c.section(o.Section)).Elem())
	}
	return w.Addr()
}

// unwire sets c from the wire struct w (a pointer): its fields, and its
// sections' values in place (the pointers c and its copies share).
func (c *Config) unwire(w reflect.Value) {
	w = w.Elem()
	cv := reflect.ValueOf(c).Elem()
	for i := range cv.NumField() {
		if f := cv.Type().Field(i); f.IsExported() {
			cv.Field(i).Set(w.FieldByName(f.Name))
		}
	}
	for j, o := range typedSections() {
		reflect.ValueOf(c.section(o.Section)).Elem().Set(w.FieldByName(sectionField(j)))
	}
}

// wireNames maps the Go types of a decoding message (the wire struct's
// and the owned sections' own) to the config's words.
func wireNames(msg string, w reflect.Type) string {
	msg = strings.ReplaceAll(msg, "in type "+w.String(), "at the top level")
	for _, o := range typedSections() {
		t := reflect.TypeOf(o.New()).Elem()
		msg = strings.ReplaceAll(msg, "in type "+t.String(), "in "+o.Section)
		// The structs inside it (a tensorrt profile).
		for _, inner := range innerStructs(t) {
			word := strings.ToLower(inner.Name())
			if strings.HasSuffix(inner.Name(), "Profile") {
				word = "profile"
			}
			msg = strings.ReplaceAll(msg, "in type "+inner.String(), "in a "+o.Section+" "+word)
		}
	}
	return msg
}

// innerStructs are the named struct types t's fields hold (in maps,
// slices or pointers), one level down.
func innerStructs(t reflect.Type) []reflect.Type {
	var out []reflect.Type
	for i := range t.NumField() {
		ft := t.Field(i).Type
		for ft.Kind() == reflect.Map || ft.Kind() == reflect.Slice || ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.Name() != "" {
			out = append(out, ft)
		}
	}
	return out
}
