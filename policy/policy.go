// Package policy is the harness's approval policy (harness "policy"):
// rules that can only tighten what a document says about a tool call.
// A rule matches calls by tool name, risk class and step, and, with a CEL
// condition (cel.dev/cel-go) over the call's arguments and the run's
// input, requires a person's approval of the call or refuses it. No rule
// allows a call the document refuses (a name outside allowedTools, a
// call that does not validate) or removes an approval the document or
// the registry asks for: the runtime asks the policy only about calls it
// would otherwise let run, and only a stricter effect is taken.
//
// A rule may also say who decides the approvals it asks for (Deciders),
// how many distinct people must approve (Approvals, N of M) and whether
// the person who started the run or approved one of its gates may
// decide (SelfApproval); a rule with Gates says the same of those gates'
// decisions. These only narrow who may decide: see [Requirement].
//
// A condition is compiled when the harness is read; one that does not
// compile, or is not boolean, is a diagnostic there. A condition that
// fails to evaluate (a missing member, a type error, over its cost
// limit) refuses the call: the policy fails closed. See docs/policy.md.
package policy

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Effects of a rule.
const (
	// RequireApproval: the call waits for a person's approval.
	RequireApproval = "requireApproval"
	// Deny: the call is refused.
	Deny = "deny"
)

// CostLimit bounds one condition's evaluation, in CEL cost units (about
// one per operation and per element a comprehension visits); past it the
// evaluation fails and the call is refused.
const CostLimit = 100_000

// Rule is one rule of the policy, as the harness gives it.
type Rule struct {
	// Name names the rule in the audit log and in messages. Required.
	Name string
	// Tools are the tool names (path.Match patterns: "stripe.*") the rule
	// is about; empty: every tool.
	Tools []string
	// RiskClasses are the tools' riskClass values the rule is about
	// ("money_movement"); empty: every class.
	RiskClasses []string
	// Steps are the step ids; empty: every step.
	Steps []string
	// Connectors are the names of what serves the tool (a connector, an
	// MCP server, "builtin"); empty: any.
	Connectors []string
	// Gates are the gate step ids the rule is about: a rule with Gates
	// matches no call, only those gates' decisions, and its effect is
	// [RequireApproval] (a gate always waits for a person).
	Gates []string
	// When is a CEL expression over args (the call's arguments), input
	// (the run's input), tool, riskClass and step that must be true for
	// the rule to apply; "" applies always.
	When string
	// Effect is [RequireApproval] or [Deny].
	Effect string
	// Reason is shown to the agent (for deny) and the approver.
	Reason string
	// Deciders, when not empty, are the only people who may decide what
	// the rule asks (a call's approval, a gate).
	Deciders Principals
	// Approvals is how many distinct people must approve (N of M); 0
	// and 1: one.
	Approvals int
	// SelfApproval lets the person who started the run, or who approved
	// one of its gates, decide what the rule asks; without it they may
	// not.
	SelfApproval bool

	prg cel.Program
}

// Principals are people named by subject or by group. The zero value
// names no one.
type Principals struct {
	Subjects []string `json:"subjects,omitempty"`
	Groups   []string `json:"groups,omitempty"`
}

// Empty reports whether p names no one.
func (p Principals) Empty() bool { return len(p.Subjects) == 0 && len(p.Groups) == 0 }

// Has reports whether the person with subject sub and groups is one of p.
func (p Principals) Has(sub string, groups []string) bool {
	if slices.Contains(p.Subjects, sub) {
		return true
	}
	for _, g := range groups {
		if slices.Contains(p.Groups, g) {
			return true
		}
	}
	return false
}

// Requirement is what the rules that ask for a decision require of who
// decides it, as the audit log records it with the request
// (approval.requested, gate.waiting: data.policy). Every rule narrows:
// a decider must be one of each rule's Deciders, Approvals is the
// largest any rule asks, and SelfApproval holds only when every rule
// allows it.
type Requirement struct {
	// Rules are the names of the rules that ask, in the file's order.
	Rules []string `json:"rules"`
	// Deciders holds, per rule that names deciders, who they are.
	Deciders []RuleDeciders `json:"deciders,omitempty"`
	// Approvals is how many distinct people must approve (at least 1).
	Approvals    int  `json:"approvals"`
	SelfApproval bool `json:"selfApproval,omitempty"`
	// Refused, when not empty, is why no one may approve: a rule's
	// condition failed to evaluate (the policy fails closed).
	Refused string `json:"refused,omitempty"`
}

// RuleDeciders are the deciders one rule names.
type RuleDeciders struct {
	Rule string `json:"rule"`
	Principals
}

// Needed returns how many distinct approvals r asks for: 1 for a nil r.
func (r *Requirement) Needed() int {
	if r == nil || r.Approvals < 1 {
		return 1
	}
	return r.Approvals
}

// Refuses returns why the person with subject sub and groups may not
// decide under r ("" if they may): the first rule whose deciders do not
// name them.
func (r *Requirement) Refuses(sub string, groups []string) string {
	if r == nil {
		return ""
	}
	for _, d := range r.Deciders {
		if !d.Has(sub, groups) {
			return fmt.Sprintf("policy rule %q names who decides, and %s is not one of them", d.Rule, sub)
		}
	}
	return ""
}

// Describe says r for a person, with who approved so far: "policy rule
// two-from-finance: 2 distinct people, of groups finance (1 so far:
// alice)".
func (r *Requirement) Describe(approved []string) string {
	s := "policy rule"
	if len(r.Rules) > 1 {
		s += "s"
	}
	s += " " + strings.Join(r.Rules, ", ") + ": "
	if r.Refused != "" {
		return s + "no one may approve (" + r.Refused + "); reject it"
	}
	if n := r.Needed(); n > 1 {
		s += fmt.Sprintf("%d distinct people", n)
	} else {
		s += "one person"
	}
	for _, d := range r.Deciders {
		var who []string
		who = append(who, d.Subjects...)
		if len(d.Groups) > 0 {
			who = append(who, "groups "+strings.Join(d.Groups, ", "))
		}
		s += ", of " + strings.Join(who, " or ")
	}
	if !r.SelfApproval {
		s += ", not who started the run or approved its gates"
	}
	if r.Needed() > 1 {
		s += fmt.Sprintf(" (%d so far", len(approved))
		if len(approved) > 0 {
			s += ": " + strings.Join(approved, ", ")
		}
		s += ")"
	}
	return s
}

func (r *Requirement) add(rule *Rule) {
	r.Rules = append(r.Rules, rule.Name)
	if !rule.Deciders.Empty() {
		r.Deciders = append(r.Deciders, RuleDeciders{Rule: rule.Name, Principals: rule.Deciders})
	}
	if len(r.Rules) == 1 {
		r.SelfApproval = rule.SelfApproval
	} else {
		r.SelfApproval = r.SelfApproval && rule.SelfApproval
	}
	r.Approvals = max(r.Approvals, rule.Approvals, 1)
}

// Policy is a compiled list of rules.
type Policy struct {
	rules []*Rule
}

// Call is what a rule is asked about.
type Call struct {
	Tool, RiskClass, Step string
	// Connector names what serves the tool (registry origin name).
	Connector string
	// Arguments are the call's arguments (a JSON object), Input the run's
	// input (JSON; nil: {}).
	Arguments, Input jsontext.Value
}

// Verdict is the policy's answer: Effect "" lets the call go on as the
// document says; else the effect and the rule that asked. Require, when
// not nil, is what every matching [RequireApproval] rule asks of who
// decides the call's approval (the document's own approval included).
type Verdict struct {
	Effect, Rule, Reason string
	Require              *Requirement
}

var env = func() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable("args", cel.DynType),
		cel.Variable("input", cel.DynType),
		cel.Variable("tool", cel.StringType),
		cel.Variable("riskClass", cel.StringType),
		cel.Variable("step", cel.StringType),
		cel.Variable("connector", cel.StringType),
		cel.CrossTypeNumericComparisons(true),
	)
	if err != nil {
		panic(err) // the declarations above are fixed
	}
	return e
}()

// Compile checks a CEL condition: it must compile and be boolean.
func Compile(expr string) (cel.Program, error) {
	ast, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		return nil, iss.Err()
	}
	if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
		return nil, fmt.Errorf("the condition is of type %s; it must be true or false", t)
	}
	return env.Program(ast, cel.CostLimit(CostLimit))
}

// New compiles rules. An error names the rule whose condition does not
// compile, or whose effect is unknown.
func New(rules []Rule) (*Policy, error) {
	p := &Policy{}
	for i := range rules {
		r := rules[i]
		if len(r.Gates) > 0 && r.Effect == "" {
			r.Effect = RequireApproval
		}
		if len(r.Gates) > 0 && (r.Effect != RequireApproval || len(r.Tools)+len(r.RiskClasses)+len(r.Connectors)+len(r.Steps) > 0) {
			return nil, fmt.Errorf("policy rule %q: a rule about gates says who decides them (effect %q); it has no tools, riskClasses, connectors or steps", r.Name, RequireApproval)
		}
		if r.Approvals < 0 || r.Approvals > MaxApprovals {
			return nil, fmt.Errorf("policy rule %q: approvals %d is not between 1 and %d", r.Name, r.Approvals, MaxApprovals)
		}
		if r.Effect == Deny && (!r.Deciders.Empty() || r.Approvals > 1 || r.SelfApproval) {
			return nil, fmt.Errorf("policy rule %q: a deny rule refuses the call; deciders, approvals and selfApproval are for %q", r.Name, RequireApproval)
		}
		if r.Effect != RequireApproval && r.Effect != Deny {
			return nil, fmt.Errorf("policy rule %q: effect %q is not %q or %q", r.Name, r.Effect, RequireApproval, Deny)
		}
		for _, pat := range r.Tools {
			if _, err := path.Match(pat, ""); err != nil {
				return nil, fmt.Errorf("policy rule %q: tool pattern %q: %v", r.Name, pat, err)
			}
		}
		if r.When != "" {
			prg, err := Compile(r.When)
			if err != nil {
				return nil, fmt.Errorf("policy rule %q: its condition: %v", r.Name, err)
			}
			r.prg = prg
		}
		p.rules = append(p.rules, &r)
	}
	return p, nil
}

// Len returns how many rules p has.
func (p *Policy) Len() int {
	if p == nil {
		return 0
	}
	return len(p.rules)
}

// MaxApprovals bounds a rule's approvals.
const MaxApprovals = 16

// ErrEvaluate wraps the failure of a condition to evaluate.
var ErrEvaluate = errors.New("a policy condition failed to evaluate")

// Evaluate asks every rule about c and returns the strictest effect: a
// deny over a required approval over nothing; among equals, the first
// rule's. A condition that fails to evaluate is an error wrapping
// [ErrEvaluate] naming its rule, with the deny verdict: the caller
// refuses the call.
func (p *Policy) Evaluate(c Call) (Verdict, error) {
	var out Verdict
	if p == nil {
		return out, nil
	}
	var vars map[string]any
	for _, r := range p.rules {
		if !r.matches(c) {
			continue
		}
		if r.prg != nil {
			if vars == nil {
				var err error
				if vars, err = variables(c); err != nil {
					return Verdict{Effect: Deny, Rule: r.Name}, fmt.Errorf("%w: rule %q: %v", ErrEvaluate, r.Name, err)
				}
			}
			b, err := r.eval(vars)
			if err != nil {
				return Verdict{Effect: Deny, Rule: r.Name}, err
			}
			if !b {
				continue
			}
		}
		if r.Effect == Deny {
			return Verdict{Effect: Deny, Rule: r.Name, Reason: r.Reason}, nil
		}
		if out.Effect == "" {
			out = Verdict{Effect: RequireApproval, Rule: r.Name, Reason: r.Reason, Require: &Requirement{}}
		}
		out.Require.add(r)
	}
	return out, nil
}

// Gate is a gate decision a rule is asked about: the gate's step id and
// the run's input (JSON; nil: {}).
type Gate struct {
	Step  string
	Input jsontext.Value
}

// EvaluateGate returns what the rules about gate g require of who decides
// it; nil when no rule is about it. A condition that fails to evaluate is
// an error wrapping [ErrEvaluate]: the gate's decision is then refused to
// everyone (the caller records a requirement nobody meets).
func (p *Policy) EvaluateGate(g Gate) (*Requirement, error) {
	if p == nil {
		return nil, nil
	}
	var out *Requirement
	var vars map[string]any
	for _, r := range p.rules {
		if len(r.Gates) == 0 || !slices.Contains(r.Gates, g.Step) {
			continue
		}
		if r.prg != nil {
			if vars == nil {
				var err error
				if vars, err = variables(Call{Step: g.Step, Input: g.Input}); err != nil {
					return nil, fmt.Errorf("%w: rule %q: %v", ErrEvaluate, r.Name, err)
				}
			}
			ok, err := r.eval(vars)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		if out == nil {
			out = &Requirement{}
		}
		out.add(r)
	}
	return out, nil
}

// Match is a rule that may apply to a tool, for explain and status.
type Match struct {
	Rule, Effect, When string
	Deciders           Principals
	Approvals          int
	SelfApproval       bool
}

// About returns the rules that match calls of c's tool, risk class,
// connector and step (c.Step "": any step), whatever their condition
// (When says it), in the file's order.
func (p *Policy) About(c Call) []Match {
	if p == nil {
		return nil
	}
	var out []Match
	for _, r := range p.rules {
		rc := c
		if c.Step == "" && len(r.Steps) > 0 {
			rc.Step = r.Steps[0]
		}
		if r.matches(rc) {
			out = append(out, r.match())
		}
	}
	return out
}

// GateRules returns the rules about gate step.
func (p *Policy) GateRules(step string) []Match {
	if p == nil {
		return nil
	}
	var out []Match
	for _, r := range p.rules {
		if slices.Contains(r.Gates, step) {
			out = append(out, r.match())
		}
	}
	return out
}

func (r *Rule) match() Match {
	return Match{Rule: r.Name, Effect: r.Effect, When: r.When, Deciders: r.Deciders, Approvals: max(r.Approvals, 1), SelfApproval: r.SelfApproval}
}

func (r *Rule) eval(vars map[string]any) (bool, error) {
	val, _, err := r.prg.Eval(vars)
	if err != nil {
		return false, fmt.Errorf("%w: rule %q: %v", ErrEvaluate, r.Name, err)
	}
	b, ok := val.Value().(bool)
	if !ok {
		return false, fmt.Errorf("%w: rule %q gave %v, not true or false", ErrEvaluate, r.Name, val.Value())
	}
	return b, nil
}

func (r *Rule) matches(c Call) bool {
	if len(r.Gates) > 0 {
		return false
	}
	if len(r.Connectors) > 0 && !slices.Contains(r.Connectors, c.Connector) {
		return false
	}
	if len(r.RiskClasses) > 0 && !slices.Contains(r.RiskClasses, c.RiskClass) {
		return false
	}
	if len(r.Steps) > 0 && !slices.Contains(r.Steps, c.Step) {
		return false
	}
	if len(r.Tools) == 0 {
		return true
	}
	for _, pat := range r.Tools {
		if ok, _ := path.Match(pat, c.Tool); ok {
			return true
		}
	}
	return false
}

func variables(c Call) (map[string]any, error) {
	var args, input any
	if len(c.Arguments) > 0 {
		if err := json.Unmarshal(c.Arguments, &args); err != nil {
			return nil, fmt.Errorf("the call's arguments are not JSON: %v", err)
		}
	}
	if args == nil {
		args = map[string]any{}
	}
	if len(c.Input) > 0 {
		if err := json.Unmarshal(c.Input, &input); err != nil {
			return nil, fmt.Errorf("the run's input is not JSON: %v", err)
		}
	}
	if input == nil {
		input = map[string]any{}
	}
	return map[string]any{"args": args, "input": input, "tool": c.Tool, "riskClass": c.RiskClass, "step": c.Step, "connector": c.Connector}, nil
}
