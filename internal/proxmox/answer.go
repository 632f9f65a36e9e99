package proxmox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/proxbus/proxbus/internal/httpbody"
)

// A request whose answer do decodes carries an *answer in its context. answerCapture, the
// innermost transport of every Client, reads a 2xx answer's body into it and hands go-proxmox
// an empty body, and go-proxmox is given no decode target: the body is decoded once, by do,
// instead of by go-proxmox's envelope decode (a validation pass, a decoding pass, a copy of
// "data", a second validation) and then by do.

// answerKey is the context key of a request's *answer.
type answerKey struct{}

// answer is the body of a request's 2xx answer; got is false until one arrived.
type answer struct {
	body []byte
	got  bool
}

// withAnswer returns ctx marked to capture its request's 2xx answer into a.
func withAnswer(ctx context.Context, a *answer) context.Context {
	return context.WithValue(ctx, answerKey{}, a)
}

// answerCapture is the transport that fills a request's *answer (see withAnswer). A body
// that cannot be read is handed on unread, so go-proxmox fails reading it as it always did.
type answerCapture struct{ next http.RoundTripper }

func (t answerCapture) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	a, ok := req.Context().Value(answerKey{}).(*answer)
	if err != nil || !ok || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp, err
	}
	body, rerr := httpbody.Read(resp, 0)
	_ = resp.Body.Close()
	if rerr != nil {
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{rerr}))
		return resp, nil
	}
	a.body, a.got = body, true
	resp.Body = http.NoBody
	return resp, nil
}

// errReader fails every read with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// errEmptyAnswer is the cause of an answer whose data is null (or that had no body).
var errEmptyAnswer = errors.New("empty answer")

// decodeAnswer decodes the "data" member of a PVE answer (the whole body when it has none, as
// go-proxmox does) into out: a *json.RawMessage gets a copy, a json.Unmarshaler (flatMap,
// flatMaps) is called with the raw value, anything else goes through json.Unmarshal. It
// fails when the body is not JSON or data is null.
func decodeAnswer(body []byte, out any) error {
	// A bytes.Buffer is parsed in place, without the decoder's own copy of the body.
	dec := jsontext.NewDecoder(bytes.NewBuffer(body), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if dec.PeekKind() != '{' {
		return decodeWhole(body, out)
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	found := false
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return err
		}
		isData := name.String() == "data" // before the next read voids the token
		val, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if !isData {
			continue
		}
		found = true
		if val.Kind() == 'n' {
			return errEmptyAnswer
		}
		if err := decodeValue(val, out); err != nil {
			return err
		}
	}
	if _, err := dec.ReadToken(); err != nil { // }
		return err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return fmt.Errorf("data after the answer: %w", err)
	}
	if !found {
		return decodeWhole(body, out)
	}
	return nil
}

// decodeWhole decodes a body that has no "data" member into out; the body must be valid JSON.
func decodeWhole(body []byte, out any) error {
	if !json.Valid(body) {
		return json.Unmarshal(body, new(any)) // encoding/json's syntax error
	}
	return decodeValue(body, out)
}

// decodeValue decodes one valid JSON value into out (see decodeAnswer).
func decodeValue(v []byte, out any) error {
	switch out := out.(type) {
	case *json.RawMessage:
		*out = append((*out)[:0], v...)
		return nil
	case json.Unmarshaler:
		return out.UnmarshalJSON(v)
	default:
		return json.Unmarshal(v, out)
	}
}
