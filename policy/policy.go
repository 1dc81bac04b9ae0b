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
	// When is a CEL expression over args (the call's arguments), input
	// (the run's input), tool, riskClass and step that must be true for
	// the rule to apply; "" applies always.
	When string
	// Effect is [RequireApproval] or [Deny].
	Effect string
	// Reason is shown to the agent (for deny) and the approver.
	Reason string

	prg cel.Program
}

// Policy is a compiled list of rules.
type Policy struct {
	rules []*Rule
}

// Call is what a rule is asked about.
type Call struct {
	Tool, RiskClass, Step string
	// Arguments are the call's arguments (a JSON object), Input the run's
	// input (JSON; nil: {}).
	Arguments, Input jsontext.Value
}

// Verdict is the policy's answer: Effect "" lets the call go on as the
// document says; else the effect and the rule that asked.
type Verdict struct {
	Effect, Rule, Reason string
}

var env = func() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable("args", cel.DynType),
		cel.Variable("input", cel.DynType),
		cel.Variable("tool", cel.StringType),
		cel.Variable("riskClass", cel.StringType),
		cel.Variable("step", cel.StringType),
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
			val, _, err := r.prg.Eval(vars)
			if err != nil {
				return Verdict{Effect: Deny, Rule: r.Name}, fmt.Errorf("%w: rule %q: %v", ErrEvaluate, r.Name, err)
			}
			b, ok := val.Value().(bool)
			if !ok {
				return Verdict{Effect: Deny, Rule: r.Name}, fmt.Errorf("%w: rule %q gave %v, not true or false", ErrEvaluate, r.Name, val.Value())
			}
			if !b {
				continue
			}
		}
		if r.Effect == Deny {
			return Verdict{Effect: Deny, Rule: r.Name, Reason: r.Reason}, nil
		}
		if out.Effect == "" {
			out = Verdict{Effect: RequireApproval, Rule: r.Name, Reason: r.Reason}
		}
	}
	return out, nil
}

func (r *Rule) matches(c Call) bool {
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
	return map[string]any{"args": args, "input": input, "tool": c.Tool, "riskClass": c.RiskClass, "step": c.Step}, nil
}
