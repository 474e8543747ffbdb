// tern's Jinja interpreter (src/llm/jinja.h) against jinja2: five real chat templates rendered by transformers'
// apply_chat_template (tests/goldens/chat_templates.json, tools/exporters/make_chat_template_goldens.py), and
// the language's corners, each expected text what jinja2 3.1 in transformers' environment prints.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "llm/jinja.h"
#include "llm/tokenizer.h"
#include "test_util.h"

namespace fs = std::filesystem;
using tern::llm::jinja::RenderOptions;
using tern::llm::jinja::Template;

namespace {

using tern::test::read_text;

std::string render(const std::string& source, const nlohmann::ordered_json& context = nlohmann::ordered_json::object()) {
  return Template(source, "test template").render(context);
}

}  // namespace

TEST_CASE("real chat templates render as transformers' apply_chat_template does") {
  const fs::path root(TERN_SOURCE_DIR);
  const nlohmann::ordered_json goldens = nlohmann::ordered_json::parse(read_text(root / "tests" / "goldens" / "chat_templates.json"));
  std::map<std::string, std::unique_ptr<tern::llm::Tokenizer>> tokenizers;
  int rendered = 0, encoded = 0;
  for (const auto& c : goldens["cases"]) {
    const std::string name = c["template"];
    CAPTURE(name);
    CAPTURE(c["case"].get<std::string>());
    const Template t(read_text(root / "tests" / "fixtures" / "chat_templates" / (name + ".jinja")), name);
    RenderOptions o;
    o.strftime_now = [](const std::string&) { return std::string("26 Jul 2024"); };
    const std::string text = t.render(c["context"], o);
    const std::string want = c["text"];
    size_t at = 0;  // where they part, for the failure's message
    while (at < text.size() && at < want.size() && text[at] == want[at]) ++at;
    CAPTURE(at);
    CAPTURE(want.substr(at >= 40 ? at - 40 : 0, 120));
    CHECK(text.substr(at >= 40 ? at - 40 : 0, 120) == want.substr(at >= 40 ? at - 40 : 0, 120));
    CHECK(text == want);
    ++rendered;
    if (!c.contains("ids")) continue;
    const fs::path dir = root / c["tokenizer"].get<std::string>();  // (models/ from get-models.sh, or a family's fixture)
    if (!fs::exists(dir / "tokenizer.json")) {
      MESSAGE(("skipped the ids of " + name + ": " + dir.string() + " is absent (scripts/get-models.sh imports it)"));
      continue;
    }
    auto& tok = tokenizers[dir.string()];
    if (!tok) tok = tern::llm::load_tokenizer(dir.string());
    CHECK(tok->encode(text, false) == c["ids"].get<std::vector<int64_t>>());
    ++encoded;
  }
  CHECK(rendered == 27);
  CHECK(encoded >= 18);  // (Qwen3's, Phi-3.5's and Llama 3's through tests/fixtures/chat_tokenizers, always here)
  MESSAGE(rendered, " conversations rendered, ", encoded, " encoded to transformers' ids");
}

TEST_CASE("Jinja: whitespace control, trim_blocks and lstrip_blocks as transformers sets them") {
  CHECK(render("a\n  {% if true %}\n  b\n  {% endif %}\nc") == "a\n  b\nc");
  CHECK(render("a  {%- if true -%}  b  {%- endif -%}  c") == "abc");
  CHECK(render("{{ 'x' }}\n{{ 'y' }}") == "x\ny");  // no trim after }}
  CHECK(render("a {{- ' b ' -}} c") == "a b c");
  CHECK(render("  {%+ if true %}x{% endif %}") == "  x");  // + keeps the indent
  CHECK(render("{% if true +%}\nx{% endif %}") == "\nx");  // + keeps the newline
  CHECK(render("{# a comment #}\nx") == "x");
  CHECK(render("{% raw %}{{ not parsed }}{% endraw %}") == "{{ not parsed }}");
  CHECK(render("{{ '}}' }}") == "}}");
}

TEST_CASE("Jinja: loops, scopes, namespaces and macros") {
  const nlohmann::ordered_json ctx = {{"xs", {"a", "b", "c"}}, {"d", {{"k1", 1}, {"k2", 2}}}};
  CHECK(render("{% for x in xs %}{{ loop.index }}{{ x }}{{ ',' if not loop.last }}{% endfor %}", ctx) == "1a,2b,3c");
  CHECK(render("{% for x in xs %}{{ loop.revindex0 }}{{ loop.first }}{{ loop.length }}|{% endfor %}", ctx) == "2True3|1False3|0False3|");
  CHECK(render("{% for x in [] %}x{% else %}empty{% endfor %}") == "empty");
  CHECK(render("{% for x in xs if x != 'b' %}{{ loop.index }}{{ x }}{% endfor %}", ctx) == "1a2c");
  CHECK(render("{% for x in xs %}{% if x == 'b' %}{% continue %}{% endif %}{% if x == 'c' %}{% break %}{% endif %}{{ x }}{% endfor %}",
               ctx) == "a");
  CHECK(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", ctx) == "k1=1;k2=2;");
  CHECK(render("{% for k in d %}{{ k }}{% endfor %}", ctx) == "k1k2");
  // A set inside a loop stays in it; a namespace carries out.
  CHECK(render("{% set n = 0 %}{% for x in xs %}{% set n = n + 1 %}{% endfor %}{{ n }}", ctx) == "0");
  CHECK(render("{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}", ctx) == "3");
  CHECK(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}") == "21");
  CHECK(render("{% set block %}in {{ 'side' }}{% endset %}[{{ block }}]") == "[in side]");
  CHECK(render("{% macro m(x, y='!') %}<{{ x }}{{ y }}>{% endmacro %}{{ m('a') }}{{ m('b', y='?') }}") == "<a!><b?>");
  CHECK(render("{% if false %}a{% elif 1 %}b{% else %}c{% endif %}") == "b");
}

TEST_CASE("Jinja: Python's values, operators, methods, filters and tests") {
  // replace as Python's str.replace: counted, an empty pattern between characters (whole UTF-8 ones), linear time
  CHECK(render("{{ 'aXbXc'|replace('X', '--') }}{{ 'aaa'.replace('a', 'bb', 2) }}") == "a--b--cbbbba");
  CHECK(render("{{ 'abc'|replace('', '-') }}|{{ 'a\u00e9c'.replace('', '-', 2) }}|{{ 'xx'.replace('x', '') }}") == "-a-b-c-|-a-\u00e9c|");
  CHECK(render("{{ none }} {{ true }} {{ 1.0 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 1 / 4 }} {{ 2 ** 10 }}") ==
        "None True 1.0 3 -4 1 2 0.25 1024");
  CHECK(render("{{ [1, 'a', none, [true]] }} {{ {'k': 'v'} }}") == "[1, 'a', None, [True]] {'k': 'v'}");
  CHECK(render("{{ 'ab' ~ 1 }} {{ 'a' + 'b' }} {{ 'ab' * 2 }} {{ 'b' in 'abc' }} {{ 2 not in [1, 2] }}") == "ab1 ab abab True False");
  CHECK(render("{{ 'a,b,,c'.split(',') }} {{ ' x y '.split() }} {{ '  t  '.strip() }}|{{ 'xxaxx'.rstrip('x') }}") ==
        "['a', 'b', '', 'c'] ['x', 'y'] t|xxa");
  CHECK(
      render("{{ 'Hello'.startswith('He') }} {{ 'Hello'.endswith(('x', 'lo')) }} {{ 'a-b'.replace('-', '+') }} {{ 'hi there'.title() }}") ==
      "True True a+b Hi There");
  CHECK(render("{{ 'abcdef'[1:3] }} {{ 'abc'[::-1] }} {{ [1, 2, 3][-1] }} {{ [1, 2, 3, 4][::2] }}") == "bc cba 3 [1, 3]");
  CHECK(render("{{ ' a '|trim }}|{{ 'x'|upper }}|{{ 'Grüße'|length }}|{{ [3, 1, 2]|sort|join(',') }}|{{ none|default('d') }}|{{ "
               "u|default('d') }}") == "a|X|5|1,2,3|None|d");  // (`none|default` keeps none: only undefined takes the default)
  CHECK(render("{{ {'b': 1, 'a': [1, 2.5, none, 'é\"']}|tojson }}") == "{\"b\": 1, \"a\": [1, 2.5, null, \"é\\\"\"]}");
  CHECK(render("{{ {'a': [1]}|tojson(indent=2) }}") == "{\n  \"a\": [\n    1\n  ]\n}");
  const nlohmann::ordered_json people = {{"ps", {{{"name", "A"}, {"age", 3}}, {{"name", "B"}}}}};
  CHECK(
      render("{{ ps|map(attribute='name')|join('+') }} {{ ps|selectattr('age', 'defined')|list|length }} {{ ps|rejectattr('age')|first }}",
             people) == "A+B 1 {'name': 'B'}");
  CHECK(render("{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ 3 is odd }} {{ 4 is divisibleby 2 }} {{ [1] is iterable }} "
               "{{ {} is mapping }} {{ 1 is not string }}") == "False True True True True True True True");
  CHECK(render("{{ 'a' if false }}|{{ 'a' if false else 'b' }}|{{ 0 or 'x' }}|{{ 1 and 'y' }}|{{ not 0 }}") == "|b|x|y|True");
  CHECK(render("{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ [1, 2, 3]|sum }} {{ [[1, 'a']]|first|last }}") ==
        "[0, 1, 2] [1, 3, 5] 6 a");
  CHECK(render("{{ 'x\\ny'|indent(2) }}|{{ 'a\\tb' }}|{{ '\\u00e9' }}") == "x\n  y|a\tb|é");
}

TEST_CASE("Jinja: bad templates are refused naming the template and the line") {
  using tern::test::contains;
  using tern::test::error_of;
  CHECK(contains(error_of([] { render("{{ 1 +"); }), "test template line 1: '{{' is never closed"));
  CHECK(contains(error_of([] { render("a\n{% if x %}"); }), "{% endif %} is missing"));
  CHECK(contains(error_of([] { render("\n\n{{ x|frobnicate }}"); }), "line 3: the filter 'frobnicate' is not supported"));
  CHECK(contains(error_of([] { render("{% include 'x' %}"); }), "{% include %} is not supported"));
  CHECK(contains(error_of([] { render("{{ raise_exception('roles must alternate') }}"); }), "test template raised: roles must alternate"));
  CHECK(contains(error_of([] { render("{{ x.y }}"); }), "'x' is undefined"));
  CHECK(contains(error_of([] { render("{{ 'a' + 1 }}"); }), "unsupported operand types for +: 'str' and 'int'"));
  CHECK(contains(error_of([] { render("{{ 1 // 0 }}"); }), "division by zero"));
  CHECK(contains(error_of([] { render("{% set x.y = 1 %}"); }), "not a namespace()"));
  CHECK(contains(error_of([] { render("{{ '\\u12G4' }}"); }), "a \\u escape needs 4 hex digits"));  // (libFuzzer's find)
  // Hostile ones end with an error, not a hang or the memory: a loop of loops, an output past the limit, macros
  // that recurse.
  // (the step cap at 100,000 here: its default, 10,000,000, took 331 s of the ASan pass to reach)
  CHECK(RenderOptions{}.max_steps == 10'000'000);
  CHECK(contains(error_of([] {
                   RenderOptions o;
                   o.max_steps = 100'000;
                   Template("{% for a in range(100000) %}{% for b in range(1000) %}{% endfor %}{% endfor %}", "test template")
                       .render(nlohmann::ordered_json::object(), o);
                 }),
                 "runs past 100000 steps"));
  CHECK(contains(error_of([] { render("{% for a in range(100000) %}{{ 'x' * 1000 }}{% endfor %}"); }), "the output passes"));
  CHECK(contains(error_of([] { render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"); }), "deeper than 64"));
  CHECK(contains(error_of([] { render("{{ range(10000000)|length }}"); }), "range() longer than"));
  CHECK(
      contains(error_of([] { render("{% set ns = namespace(x='ab') %}{% for i in range(40) %}{% set ns.x = ns.x ~ ns.x %}{% endfor %}"); }),
               "passes 16777216 bytes"));
  CHECK(contains(error_of([] { render("{{ ('x' * 1000000)|replace('x', 'yyyyyyyyyyyyyyyyyyyy') }}"); }), "passes 16777216 bytes"));
  CHECK(contains(error_of([] { render("{{ range(100000)|join('x' * 1000) }}"); }), "passes 16777216 bytes"));
  // Nesting a parser would recurse through: parentheses, `not`s, blocks; and JSON values given to it.
  CHECK(contains(error_of([] { render("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}"); }),
                 "nests deeper than 100"));
  CHECK(contains(error_of([] {
                   std::string t;
                   for (int i = 0; i < 100000; ++i) t += "not ";
                   render("{{ " + t + "1 }}");
                 }),
                 "nests deeper than 100"));
  CHECK(contains(error_of([] {
                   std::string t;
                   for (int i = 0; i < 50000; ++i) t += "{% if 1 %}";
                   render(t);
                 }),
                 "blocks nest deeper than 100"));
  nlohmann::ordered_json deep = 1;
  for (int i = 0; i < 200; ++i) deep = nlohmann::ordered_json::array({deep});
  CHECK(contains(error_of([&] { render("{{ x }}", {{"x", deep}}); }), "nests deeper than 100"));
}
