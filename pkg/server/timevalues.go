package server

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// invalidTime finds a google.protobuf.Duration or Timestamp in a request
// that its own type refuses: nanos out of range or of the other sign than
// the seconds, or beyond ten thousand years. Read as they are, such values
// are silently normalised (nanos of 2e9 taken as 2 s) or saturated, so a
// client's mistake becomes another time control or deadline than it sent.
// The JSON forms cannot spell them; the binary ones can.
func invalidTime(req any) (why string, ok bool) {
	m, isMsg := req.(proto.Message)
	if !isMsg {
		return "", false
	}
	return invalidTimeIn(m.ProtoReflect(), "")
}

func invalidTimeIn(m protoreflect.Message, path string) (string, bool) {
	// Messages of our own: protobuf's are not meant to be shown (they
	// hold a no-break space, and change between releases).
	switch v := m.Interface().(type) {
	case *durationpb.Duration:
		if v.CheckValid() != nil {
			return fmt.Sprintf("%s: not a valid google.protobuf.Duration (seconds %d, nanos %d): nanos must lie within ±999999999 with the sign of seconds, and seconds within ±315576000000", path, v.GetSeconds(), v.GetNanos()), true
		}
	case *timestamppb.Timestamp:
		if v.CheckValid() != nil {
			return fmt.Sprintf("%s: not a valid google.protobuf.Timestamp (seconds %d, nanos %d): nanos must lie within 0..999999999, and the time within years 1 to 9999", path, v.GetSeconds(), v.GetNanos()), true
		}
	}
	var why string
	var bad bool
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil {
			return true
		}
		name := string(fd.Name())
		if path != "" {
			name = path + "." + name
		}
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && !bad; i++ {
				why, bad = invalidTimeIn(l.Get(i).Message(), name)
			}
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					why, bad = invalidTimeIn(mv.Message(), name)
					return !bad
				})
			}
		default:
			why, bad = invalidTimeIn(v.Message(), name)
		}
		return !bad
	})
	return why, bad
}
