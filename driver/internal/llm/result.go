package llm

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/openplaybook/openplaybook/driver"
)

// DefaultMaxResultBytes is the default of the model-facing result limit
// (a model driver's setting "maxResultBytes"): the most bytes of a tool
// result's text a model is shown. The runtime's own, hard limit on a
// result (4 MiB by default) is checked before: a result over it is
// refused before the store and the model.
const DefaultMaxResultBytes = 64 << 10

// ImageTypes are the media types of images the model APIs take as image
// input (Anthropic image blocks; OpenAI image_url parts): PNG, JPEG, GIF
// and WebP.
var ImageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// Part is one piece of what a model is shown of a tool's result: a text,
// or an image.
type Part struct {
	Text  string
	Image *Image
}

// Image is an image a tool returned (MCP image content), for a model
// that takes images.
type Image struct {
	// MediaType is one of [ImageTypes].
	MediaType string
	// Data is the image, base64 (standard encoding, padded), as the
	// tool sent it.
	Data string
	// Size is the image's size in bytes (decoded).
	Size int
}

// Shown says how a driver shows tool results to its model.
type Shown struct {
	// Limit is the most bytes of a result's text the model is shown
	// (setting "maxResultBytes"). Zero: [DefaultMaxResultBytes].
	Limit int
	// Images says the model is shown images as images (Anthropic image
	// blocks, OpenAI image_url parts). False: each image is a notice
	// in the text.
	Images bool
	// ImagesLater says the images are shown after the result's text, in
	// a message of their own (OpenAI: a tool message takes text only),
	// which the notices in the text say.
	ImagesLater bool
}

func (s Shown) limit() int {
	if s.Limit > 0 {
		return s.Limit
	}
	return DefaultMaxResultBytes
}

// ResultText returns the text a tool message carries for r, with the
// default model-facing limit and images as notices: see [Shown.Text].
func ResultText(r driver.Result) string { return Shown{}.Text(r) }

// Text returns the text a tool message carries for r: for an error,
// {"error": message}; for a result, the content's text ([Shown.Parts])
// with each image as a notice (or, with ImagesLater, a note that it
// follows). Text over the limit is a notice and a preview
// ([Shown.Clip]).
func (s Shown) Text(r driver.Result) string {
	if r.Error != "" {
		b, err := json.Marshal(struct {
			Error string `json:"error"`
		}{s.Clip(r.Error)}, jsontext.AllowInvalidUTF8(true))
		if err != nil {
			return `{"error":` + strconv.QuoteToASCII(r.Error) + `}`
		}
		return string(b)
	}
	var b strings.Builder
	for _, p := range s.Parts(r.Content) {
		if p.Image != nil {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

// ErrorText returns the text shown for a tool error: message, clipped
// to the limit.
func (s Shown) ErrorText(message string) string { return s.Clip(message) }

// Parts returns what the model is shown of a result's content, in
// order: its JSON text ("null" when empty); or, for MCP content kept as
// {"content": [...]} (docs/drivers.md, "Rich results"), each block's
// text, and each image, which is an image part when the model is shown
// images and a text notice otherwise. Adjacent texts are joined by a
// line break. When the text is longer than the limit, the texts become
// one notice with a preview ([Shown.Clip]), followed by the images.
func (s Shown) Parts(content jsontext.Value) []Part {
	blocks, rich := MCPContent(content)
	if !rich {
		return []Part{{Text: s.Clip(jsonText(content))}}
	}
	var parts []Part
	var text strings.Builder
	images := 0
	addText := func(t string) {
		if len(parts) > 0 && parts[len(parts)-1].Image == nil {
			parts[len(parts)-1].Text += "\n" + t
		} else {
			parts = append(parts, Part{Text: t})
		}
		if text.Len() > 0 {
			text.WriteByte('\n')
		}
		text.WriteString(t)
	}
	for _, b := range blocks {
		img, notice := s.image(b, images+1)
		if img != nil {
			images++
			if s.ImagesLater {
				addText(fmt.Sprintf("[image %d of this result (%s, %d bytes): shown after the tool results]", images, img.MediaType, img.Size))
			}
			parts = append(parts, Part{Image: img})
			continue
		}
		if notice != "" {
			addText(notice)
			continue
		}
		addText(blockText(b))
	}
	if text.Len() > s.limit() {
		clipped := []Part{{Text: s.Clip(text.String())}}
		for _, p := range parts {
			if p.Image != nil {
				clipped = append(clipped, p)
			}
		}
		return clipped
	}
	if len(parts) == 0 {
		return []Part{{Text: ""}}
	}
	return parts
}

// Clip returns text when it is at most the limit; else a notice saying
// how large the result is, how many bytes were cut and that the whole
// result is in the run's store, followed by the text's first bytes up to
// the limit (cut at a character boundary: valid UTF-8).
func (s Shown) Clip(text string) string {
	n := s.limit()
	if len(text) <= n {
		return text
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	preview := strings.ToValidUTF8(text[:cut], "\uFFFD")
	return fmt.Sprintf("[This result is %d bytes, over the %d bytes an agent is shown of a tool's result (setting \"maxResultBytes\"): "+
		"its first %d bytes follow and %d bytes were cut. The whole result is kept in the run's store.]\n%s",
		len(text), n, cut, len(text)-cut, preview)
}

// Block is one block of MCP content ([MCPContent]): its type and its
// members as the tool sent them.
type Block struct {
	Type    string
	Members map[string]jsontext.Value
	Raw     jsontext.Value
}

func (b Block) str(name string) string {
	var s string
	if v, ok := b.Members[name]; ok {
		_ = json.Unmarshal(v, &s)
	}
	return s
}

// mcpTypes are the MCP content block types a rich result holds.
var mcpTypes = []string{"text", "image", "audio", "resource_link", "resource"}

// MCPContent reports whether v is MCP content as the runtime keeps it
// (docs/drivers.md, "Rich results"): an object whose only member is
// "content", an array of at least one object, each with a "type" among
// text, image, audio, resource_link and resource; and returns its
// blocks. Any other value is a plain result.
func MCPContent(v jsontext.Value) ([]Block, bool) {
	if len(v) == 0 || v.Kind() != '{' {
		return nil, false
	}
	var env map[string]jsontext.Value
	if json.Unmarshal(v, &env) != nil || len(env) != 1 {
		return nil, false
	}
	var raw []jsontext.Value
	if json.Unmarshal(env["content"], &raw) != nil || len(raw) == 0 {
		return nil, false
	}
	blocks := make([]Block, len(raw))
	for i, r := range raw {
		var m map[string]jsontext.Value
		if r.Kind() != '{' || json.Unmarshal(r, &m) != nil {
			return nil, false
		}
		b := Block{Members: m, Raw: r}
		if b.Type = b.str("type"); !slices.Contains(mcpTypes, b.Type) {
			return nil, false
		}
		blocks[i] = b
	}
	return blocks, true
}

// image returns b as an image the model is shown, or the notice that
// stands for a block the model cannot be shown (an image it does not
// take, audio, a binary resource); neither for a block shown as text.
func (s Shown) image(b Block, n int) (*Image, string) {
	switch b.Type {
	case "image":
		mt, data := b.str("mimeType"), b.str("data")
		raw, err := base64.StdEncoding.DecodeString(data)
		switch {
		case err != nil:
			return nil, fmt.Sprintf("[an image (%s) the tool returned is not valid base64; it is not shown]", quoteType(mt))
		case !slices.Contains(ImageTypes, mt):
			return nil, fmt.Sprintf("[an image (%s, %d bytes) the tool returned is not shown: a model is shown PNG, JPEG, GIF and WebP images]", quoteType(mt), len(raw))
		case !s.Images:
			return nil, fmt.Sprintf("[an image (%s, %d bytes) the tool returned is not shown: this agent is not shown images]", mt, len(raw))
		}
		return &Image{MediaType: mt, Data: data, Size: len(raw)}, ""
	case "audio":
		return nil, fmt.Sprintf("[audio (%s, %d base64 bytes) the tool returned is not shown]", quoteType(b.str("mimeType")), len(b.str("data")))
	case "resource":
		var res struct {
			URI      string  `json:"uri"`
			MimeType string  `json:"mimeType"`
			Text     *string `json:"text"`
			Blob     string  `json:"blob"`
		}
		if json.Unmarshal(b.Members["resource"], &res) == nil && res.Text == nil {
			return nil, fmt.Sprintf("[a binary resource %s (%s, %d base64 bytes) the tool returned is not shown]", strconv.Quote(res.URI), quoteType(res.MimeType), len(res.Blob))
		}
	}
	return nil, ""
}

func quoteType(mt string) string {
	if mt == "" {
		return "no media type"
	}
	return strconv.Quote(mt)
}

// blockText is the text of a block shown as text: a text block's text;
// an embedded text resource's URI and text; any other block (a resource
// link) as "resource link" and its JSON.
func blockText(b Block) string {
	switch b.Type {
	case "text":
		return b.str("text")
	case "resource":
		var res struct {
			URI  string `json:"uri"`
			Text string `json:"text"`
		}
		if json.Unmarshal(b.Members["resource"], &res) == nil {
			return fmt.Sprintf("[resource %s]\n%s", strconv.Quote(res.URI), res.Text)
		}
	case "resource_link":
		return "[resource link] " + string(b.Raw)
	}
	return string(b.Raw)
}
