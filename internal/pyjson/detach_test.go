package pyjson

import "testing"

// Detach copies each Raw out of the document's text, compact: the text can then be reused
// or freed, and an indented manifest's shapes take a third of the room.
func TestDetachCopiesRaw(t *testing.T) {
	doc := []byte("{\"cells\": [{\"id\": \"a\", \"cases\": [{\n  \"m\": 1,\r\n\t\"s\": \" a\\\" \\\\\"}]}]}")
	v, err := ParseDepth(doc, 4)
	if err != nil {
		t.Fatal(err)
	}
	v = Detach(v)
	for i := range doc {
		doc[i] = 'x'
	}
	cells, _ := v.(*Object).Array("cells")
	cases, _ := cells[0].(*Object).Array("cases")
	if raw, ok := cases[0].(Raw); !ok || string(raw) != `{"m":1,"s":" a\" \\"}` {
		t.Fatalf("after the document was overwritten, the case is %#v", cases[0])
	}
}
