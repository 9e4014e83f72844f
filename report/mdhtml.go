package report

import (
	"html"
	"html/template"
	"strings"
)

// markdownTables renders the subset of Markdown that WriteMarkdown writes
// (headings, tables, code spans, bold, details blocks, notes) as HTML, so the
// page and the comment show the same tables. Every piece of text is
// escaped; only tags made here reach the page.
func markdownTables(md string) template.HTML {
	var b strings.Builder
	inTable, header := false, false
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "|") && inTable {
			b.WriteString("</table></div>\n")
			inTable = false
		}
		switch {
		case strings.HasPrefix(line, "## "):
			// The page has its own title.
		case strings.HasPrefix(line, "|---"):
		case strings.HasPrefix(line, "|"):
			if !inTable {
				// A wide table scrolls inside its own box, not the page.
				b.WriteString("<div class=\"table\"><table>\n")
				inTable, header = true, true
			}
			cell := "td"
			if header {
				cell, header = "th", false
			}
			b.WriteString("<tr>")
			for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
				b.WriteString("<" + cell + ">" + inline(strings.TrimSpace(c)) + "</" + cell + ">")
			}
			b.WriteString("</tr>\n")
		case strings.HasPrefix(line, "<details><summary>"):
			s := strings.TrimSuffix(strings.TrimPrefix(line, "<details><summary>"), "</summary>")
			s = strings.NewReplacer("<code>", "`", "</code>", "`").Replace(s)
			b.WriteString("<details open><summary>" + inline(s) + "</summary>\n")
		case line == "</details>":
			b.WriteString("</details>\n")
		case strings.HasPrefix(line, "> "):
			b.WriteString("<p><em>" + inline(strings.TrimPrefix(line, "> ")) + "</em></p>\n")
		case strings.TrimSpace(line) != "":
			b.WriteString("<p>" + inline(line) + "</p>\n")
		}
	}
	if inTable {
		b.WriteString("</table></div>\n")
	}
	return template.HTML(b.String())
}

// inline escapes text, turns **bold** (the warnings) into <strong> and
// `code` spans into <code>.
func inline(s string) string {
	bold := strings.Split(s, "**")
	if len(bold) > 1 && len(bold)%2 == 1 {
		var b strings.Builder
		for i, p := range bold {
			if i%2 == 1 {
				b.WriteString("<strong>" + code(p) + "</strong>")
				continue
			}
			b.WriteString(code(p))
		}
		return b.String()
	}
	return code(s)
}

// code escapes text and turns `code` spans into <code>.
func code(s string) string {
	parts := strings.Split(s, "`")
	var b strings.Builder
	for i, p := range parts {
		if i%2 == 1 && i < len(parts)-1 {
			b.WriteString("<code>" + html.EscapeString(p) + "</code>")
			continue
		}
		if i%2 == 1 {
			b.WriteString("`")
		}
		b.WriteString(html.EscapeString(p))
	}
	return b.String()
}
