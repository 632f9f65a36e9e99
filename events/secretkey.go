package events

import (
	"bytes"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/proxbus/proxbus/internal/redact"
)

// hasSecretKey reports whether the JSON document doc has a secret-named member
// ([redact.IsSecretName]) in an object at any depth; false for a document that is not valid
// JSON. Text that cannot spell such a name (ASCII without escapes and without any of the
// words) is answered without parsing; otherwise the document is validated and its member
// names read in one streaming pass, the values never decoded.
func hasSecretKey(doc []byte) bool {
	if bytes.IndexByte(doc, '\\') < 0 && !redact.MayNameSecret(string(doc)) {
		return false
	}
	if !validJSON(doc) { // the decoder below would also read a second document after the first
		return false
	}
	dec := jsontext.NewDecoder(bytes.NewReader(doc), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	for {
		// Inside an object an even number of tokens read so far means a name comes next.
		kind, n := dec.StackIndex(dec.StackDepth())
		name := kind == '{' && n%2 == 0
		tok, err := dec.ReadToken()
		if err != nil {
			return false // io.EOF at the end of a document without one; anything else is not JSON
		}
		if name && tok.Kind() == '"' && redact.IsSecretName(tok.String()) {
			return true
		}
	}
}
