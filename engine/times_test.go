package engine

import (
	"reflect"
	"testing"

	"cgtune/stepmodel"
)

// notStepTimes are Result's number fields that a scaling of the step
// leaves as they are, and why.
var notStepTimes = map[string]string{
	"Speedup": "a ratio of two step times, the same at any scale",
	"WallMs":  "the wall time the run itself took, not a time of the step",
}

// Every number field of Result (a float64 or stepmodel.Stats) is either
// scaled by scaleTimes or named in notStepTimes: a time field added to
// Result and left out of scaleTimes fails here instead of going unscaled.
func TestScaleTimesCoversEveryTime(t *testing.T) {
	statsType := reflect.TypeOf(stepmodel.Stats{})
	var r Result
	v := reflect.ValueOf(&r).Elem()
	var checked []string
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch {
		case f.Kind() == reflect.Float64:
			f.SetFloat(3)
		case f.Type() == statsType:
			f.Set(reflect.ValueOf(stepmodel.Stats{Median: 3, P10: 3, P90: 3, N: 7}))
		default:
			continue
		}
		checked = append(checked, v.Type().Field(i).Name)
	}
	r.scaleTimes(2)
	for _, name := range checked {
		f := v.FieldByName(name)
		_, same := notStepTimes[name]
		want := 6.0
		if same {
			want = 3
		}
		switch f.Kind() {
		case reflect.Float64:
			if f.Float() != want {
				t.Errorf("%s = %v after scaling 3 by 2, want %v (scale it in scaleTimes, or say in notStepTimes why not)", name, f.Float(), want)
			}
		default:
			s := f.Interface().(stepmodel.Stats)
			if s.Median != want || s.P10 != want || s.P90 != want || s.N != 7 {
				t.Errorf("%s = %+v after scaling 3 by 2, want times %v and the count 7", name, s, want)
			}
		}
	}
	for name := range notStepTimes {
		if !v.FieldByName(name).IsValid() {
			t.Errorf("notStepTimes names %s, which Result does not have", name)
		}
	}
	if len(checked) < 10 {
		t.Errorf("only %d number fields found in Result (%v): the walk missed some", len(checked), checked)
	}
}
