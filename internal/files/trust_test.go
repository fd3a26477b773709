package files

import (
	"strings"
	"testing"
)

// A fetched document is checked by ReadJSON's rules: Python's (NaN is JSON to it), and an
// object, not any JSON.
func TestCheckJSONObject(t *testing.T) {
	for doc, want := range map[string]string{
		`{"hidden_size": 4096, "rope_scaling": null, "eps": NaN}`: "",
		`[1, 2]`:           "not a JSON object",
		`"a string"`:       "not a JSON object",
		`<html>404</html>`: "not JSON: ",
		``:                 "not JSON: ",
	} {
		err := CheckJSONObject([]byte(doc))
		if (want == "") != (err == nil) || (err != nil && !strings.HasPrefix(err.Error(), want)) {
			t.Errorf("%q: %v, want %q", doc, err, want)
		}
	}
}
