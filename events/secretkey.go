package events

import (
	"bytes"
	"encoding/json"

	"github.com/proxbus/proxbus/internal/redact"
)

// hasSecretKey reports whether the JSON document doc has a secret-named member
// ([redact.IsSecretName]) in an object at any depth, every occurrence of a repeated name
// included; false for a document that is not valid JSON.
func hasSecretKey(doc []byte) bool {
	if !json.Valid(doc) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber() // a number beyond a float64 is still valid JSON
	found, _ := secretKeyIn(dec)
	return found
}

// secretKeyIn reads the next value from dec and reports whether it holds a secret-named
// member, stopping at the first one.
func secretKeyIn(dec *json.Decoder) (bool, error) {
	tok, err := dec.Token()
	if err != nil || (tok != json.Delim('{') && tok != json.Delim('[')) {
		return false, err
	}
	for dec.More() {
		if tok == json.Delim('{') {
			name, err := dec.Token()
			if err != nil {
				return false, err
			}
			if s, _ := name.(string); redact.IsSecretName(s) {
				return true, nil
			}
		}
		if found, err := secretKeyIn(dec); found || err != nil {
			return found, err
		}
	}
	_, err = dec.Token() // the closing delimiter, so that the enclosing value reads on
	return false, err
}
