package explain

import (
	"fmt"
	"slices"
	"strings"
)

// The step graph of the html format is laid out here, in Go, and drawn by
// the page template as inline SVG: steps top to bottom in document order in
// one column; agent steps as boxes and gates as diamonds, coloured by risk;
// a next edge to the following step straight down; every other next edge on
// the right and every onReject edge on the left, each in its own vertical
// lane, entering its target from above; the ends of the run as pills beside
// the step that ends it. All text reaches the page through html/template.

// Layout constants, in SVG user units (pixels).
const (
	boxW       = 260 // width of a step box or diamond
	agentH     = 54  // height of an agent box
	gateH      = 88  // height of a gate diamond
	gapY       = 56  // vertical space between steps
	topY       = 44  // space above the first step (room for incoming lanes)
	margin     = 16
	pillGap    = 60 // from a box's side to a terminal pill
	pillW      = 150
	pillH      = 26
	laneGap    = 18                   // between two lanes
	sideZone   = pillGap + pillW + 20 // from a box's side to its first lane
	attachIn   = 24                   // first incoming attach point from a box's corner
	attachDx   = 14                   // between incoming attach points
	entryDy    = 12                   // first incoming segment above a box
	entryDdy   = 6                    // between incoming segments
	maxEntries = 6                    // distinct incoming entries per side of a step
	labelDy    = 5                    // edge label above its segment
	maxLine1   = 30                   // runes of a step's id shown in a box
	maxLine2   = 38                   // runes of a box's second line
	maxGate1   = 22                   // runes of a gate's id shown in a diamond
	maxPill    = 24                   // runes of a pill's text
	approvalW  = 104                  // width of a step's "needs approval" badge
	approvalH  = 18                   // its height
)

// svgGraph is the laid-out step graph handed to the page template. Every
// string in it is either produced here from constants or document text
// that the template escapes.
type svgGraph struct {
	Width, Height int
	Nodes         []svgNode
	Edges         []svgEdge
	Pills         []svgPill
}

type svgNode struct {
	Index      int  // step index, for the link to its section
	Gate       bool // drawn as a diamond
	X, Y, W, H int
	Points     string // the diamond's polygon
	Risk       string // one of riskStyles
	Approval   bool   // the step allows a tool declaring requiresApproval: a badge on the box
	AX, AY     int    // the approval badge's top left corner
	Title      string // tooltip: the step's id and purpose (and the tools needing approval)
	Line1      string
	Line2      string
	TX         int // text centre
	TY1, TY2   int // text baselines
}

type svgEdge struct {
	D      string // path data
	Class  string // "edge", "edge reject" or "edge missing"
	Marker string // marker id: "arrow" or "arrow-reject"
	Label  string // "", "approve" or "reject"
	LX, LY int
	Anchor string // text-anchor of the label
}

type svgPill struct {
	X, Y, W, H int
	Class      string // "pill" or "pill missing"
	Text       string
	TX, TY     int
}

type placed struct {
	top, bottom, cy int
	gate            bool
}

// layout places e's step graph.
func layout(e *Explanation) svgGraph {
	all := edges(e)
	var right, left []int // indices into all of lane edges
	for k, ed := range all {
		switch {
		case ed.to < 0:
		case ed.label == "reject":
			left = append(left, k)
		case ed.to != ed.from+1:
			right = append(right, k)
		}
	}
	span := func(k int) int { return max(all[k].to-all[k].from, all[k].from-all[k].to) }
	bySpan := func(a, b int) int { return span(a) - span(b) }
	slices.SortStableFunc(right, bySpan)
	slices.SortStableFunc(left, bySpan)

	boxL := margin + sideZone + len(left)*laneGap
	boxR := boxL + boxW
	cx := boxL + boxW/2
	g := svgGraph{Width: boxR + sideZone + max(len(right)-1, 0)*laneGap + margin}

	pos := make([]placed, len(e.Steps))
	y := topY
	for i := range e.Steps {
		st := &e.Steps[i]
		h := agentH
		if isGate(st) {
			h = gateH
		}
		pos[i] = placed{top: y, bottom: y + h, cy: y + h/2, gate: isGate(st)}
		n := svgNode{Index: i, Gate: isGate(st), X: boxL, Y: y, W: boxW, H: h, Risk: riskStyle(st.RiskClass), TX: cx}
		n.Title = clean(st.Ref + ": " + orNone(st.Purpose, "(no purpose given)"))
		if n.Gate {
			n.Points = fmt.Sprintf("%d,%d %d,%d %d,%d %d,%d", cx, y, boxR, y+h/2, cx, y+h, boxL, y+h/2)
			n.Line1 = truncate(clean(st.Ref), maxGate1)
			n.Line2 = "gate: a person decides"
			n.TY1, n.TY2 = y+h/2-4, y+h/2+14
		} else {
			risk := st.RiskClass
			if st.RiskClaimed {
				risk += " (claim)"
			}
			n.Line1 = truncate(clean(st.Ref), maxLine1)
			n.Line2 = truncate(clean(kindText(st)), maxLine2-len(risk)-3) + " · " + risk
			n.TY1, n.TY2 = y+22, y+41
			if len(st.ApprovalTools) > 0 {
				// The badge straddles the box's bottom edge, at its
				// right: no edge arrives or leaves there (lanes enter
				// from above, leave from the sides; the edge straight
				// down leaves from the middle).
				n.Approval, n.AX, n.AY = true, boxR-approvalW-8, y+h-approvalH/2
				n.Title += clean(" · needs approval: " + strings.Join(st.ApprovalTools, ", "))
			}
		}
		g.Nodes = append(g.Nodes, n)
		y += h + gapY
	}
	g.Height = y - gapY + margin + pillH
	if len(e.Steps) == 0 {
		g.Height = topY + margin
	}

	// Each lane edge enters its target from above. Entries into one target
	// from one side are numbered in lane order, inner lane first, so that
	// an outer edge enters higher and further from the corner and does not
	// cross an inner one.
	entryK := map[int]int{}
	count := map[[2]int]int{}
	for side, ks := range [][]int{left, right} {
		for _, k := range ks {
			key := [2]int{all[k].to, side}
			entryK[k] = count[key]
			count[key]++
		}
	}
	entry := func(k int, rightSide bool) (x, yTop, yIn int) {
		p := pos[all[k].to]
		n := entryK[k]
		// Many edges into one step share entries rather than leave the
		// gap above it or cross to the other half of the box.
		yTop = p.top - entryDy - min(n, maxEntries-1)*entryDdy
		nx := n % maxEntries
		if rightSide {
			x = boxR - attachIn - nx*attachDx
		} else {
			x = boxL + attachIn + nx*attachDx
		}
		yIn = p.top
		if p.gate { // where the diamond's upper edge is at x
			d := max(x-cx, cx-x)
			yIn = p.top + (gateH/2)*d/(boxW/2)
		}
		return x, yTop, yIn
	}
	lane := map[int]int{}
	for i, k := range right {
		lane[k] = boxR + sideZone + i*laneGap
	}
	for i, k := range left {
		lane[k] = boxL - sideZone - i*laneGap
	}

	for k, ed := range all {
		from := pos[ed.from]
		se := svgEdge{Class: "edge", Marker: "arrow", Label: ed.label}
		if ed.label == "reject" {
			se.Class, se.Marker = "edge reject", "arrow-reject"
		}
		rightSide := ed.label != "reject"
		side, dir, anchor := boxR, 1, "start"
		if !rightSide {
			side, dir, anchor = boxL, -1, "end"
		}
		se.LX, se.LY, se.Anchor = side+dir*6, from.cy-labelDy, anchor
		switch {
		case ed.to < 0:
			pill := svgPill{Y: from.cy - pillH/2, W: pillW, H: pillH, Class: "pill", TY: from.cy + 4}
			if rightSide {
				pill.X = boxR + pillGap
			} else {
				pill.X = boxL - pillGap - pillW
			}
			pill.TX = pill.X + pillW/2
			switch ed.to {
			case toEnd:
				pill.Text = "end of run"
			case toRejected:
				pill.Text = "run ends rejected"
			default:
				pill.Class = "pill missing"
				se.Class += " missing"
				pill.Text = truncate("no such step: "+clean(ed.name), maxPill)
			}
			end := pill.X
			if !rightSide {
				end = pill.X + pillW
			}
			se.D = fmt.Sprintf("M %d %d H %d", side, from.cy, end)
			g.Pills = append(g.Pills, pill)
		case ed.to == ed.from+1 && rightSide:
			se.D = fmt.Sprintf("M %d %d V %d", cx, from.bottom, pos[ed.to].top)
			se.LX, se.LY, se.Anchor = cx+6, (from.bottom+pos[ed.to].top)/2+4, "start"
		default:
			x, yTop, yIn := entry(k, rightSide)
			se.D = fmt.Sprintf("M %d %d H %d V %d H %d V %d", side, from.cy, lane[k], yTop, x, yIn)
		}
		g.Edges = append(g.Edges, se)
	}
	return g
}

// svgLegend lists the risk styles with what they mean, for the legend.
func svgLegend() []struct{ Risk, Text string } {
	text := map[string]string{
		"read":           "read: only reads",
		"internal":       "internal: writes inside the workspace",
		"customer_comms": "customer_comms: reaches customers",
		"money":          "money: moves money",
		RiskUnknown:      "unknown: not declared",
		RiskNone:         "none: calls no tool",
	}
	var out []struct{ Risk, Text string }
	for _, r := range riskStyles {
		out = append(out, struct{ Risk, Text string }{r, text[r]})
	}
	return out
}
