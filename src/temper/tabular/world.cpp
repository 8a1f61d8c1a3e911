// Deterministic worlds from grid maps and transition lists (see world.h).
#include "temper/tabular/world.h"

#include <map>
#include <set>
#include <sstream>

#include "temper/core/error.h"
#include "temper/core/settings.h"

namespace temper::tabular {

int World::event_index(const std::string& e) const {
  for (size_t i = 0; i < events.size(); ++i)
    if (events[i] == e) return static_cast<int>(i);
  return -1;
}

std::string World::event_list() const {
  return join_words(events, ", ");
}

std::string World::label_text(uint32_t mask) const {
  std::string out;
  for (size_t i = 0; i < events.size(); ++i)
    if (mask >> i & 1) out += (out.empty() ? "" : "+") + events[i];
  return out.empty() ? "none" : out;
}

namespace {

// The legend "c=coffee" entries as character -> event index; events in legend order.
std::map<char, int> read_legend(const GridSpec& g, const std::string& name, std::vector<std::string>& events) {
  std::map<char, int> sym;
  for (const std::string& entry : g.legend) {
    const size_t eq = entry.find('=');
    TEMPER_CHECK(eq == 1 && entry.size() > 2) << "world '" << name << "': legend entry '" << entry
                                              << "': expected one character, '=', an event name (c=coffee)";
    const char c = entry[0];
    TEMPER_CHECK(c != '#' && c != '.' && c != 'A' && c != ' ')
        << "world '" << name << "': legend entry '" << entry << "': '#', '.', 'A' and ' ' are the map's own symbols";
    TEMPER_CHECK(!sym.count(c)) << "world '" << name << "': legend gives '" << c << "' twice";
    const std::string ev = entry.substr(2);
    int idx = -1;
    for (size_t i = 0; i < events.size(); ++i)
      if (events[i] == ev) idx = static_cast<int>(i);
    if (idx < 0) {
      events.push_back(ev);
      idx = static_cast<int>(events.size()) - 1;
    }
    sym[c] = idx;
  }
  TEMPER_CHECK(events.size() <= 32) << "world '" << name << "': " << events.size() << " events; at most 32";
  return sym;
}

}  // namespace

World world_from_grid(const GridSpec& g, const std::string& name) {
  World w;
  w.name = name;
  w.rows = g.rows;
  const std::map<char, int> sym = read_legend(g, name, w.events);
  TEMPER_CHECK(!g.rows.empty()) << "world '" << name << "': the grid has no rows";
  const int64_t H = static_cast<int64_t>(g.rows.size()), W = static_cast<int64_t>(g.rows[0].size());
  std::vector<int64_t> id(H * W, -1);
  std::vector<int> ev_of;  // per state: event index or -1
  int64_t starts = 0;
  for (int64_t r = 0; r < H; ++r) {
    TEMPER_CHECK(static_cast<int64_t>(g.rows[r].size()) == W)
        << "world '" << name << "': row " << r << " has " << g.rows[r].size() << " cells, row 0 has " << W;
    for (int64_t c = 0; c < W; ++c) {
      const char ch = g.rows[r][c];
      if (ch == '#') continue;
      TEMPER_CHECK(ch == '.' || ch == 'A' || sym.count(ch))
          << "world '" << name << "': row " << r << " column " << c << ": '" << ch
          << "' is neither '#', '.', 'A' nor in the legend (add e.g. \"" << ch << "=event\")";
      id[r * W + c] = w.states++;
      w.cell.push_back({r, c});
      w.state_names.push_back("(" + std::to_string(r) + "," + std::to_string(c) + ")");
      ev_of.push_back(sym.count(ch) ? sym.at(ch) : -1);
      if (ch == 'A') {
        w.start = id[r * W + c];
        ++starts;
      }
    }
  }
  TEMPER_CHECK(starts == 1) << "world '" << name << "': the grid needs exactly one start cell 'A', it has " << starts;
  w.actions = 4;
  const int64_t dr[4] = {-1, 0, 1, 0}, dc[4] = {0, 1, 0, -1};
  w.next.resize(w.states * 4);
  w.label.resize(w.states * 4);
  for (int64_t s = 0; s < w.states; ++s)
    for (int64_t a = 0; a < 4; ++a) {
      const int64_t r = w.cell[s].first + dr[a], c = w.cell[s].second + dc[a];
      const bool open = r >= 0 && r < H && c >= 0 && c < W && id[r * W + c] >= 0;
      const int64_t s2 = open ? id[r * W + c] : s;
      w.next[s * 4 + a] = s2;
      w.label[s * 4 + a] = ev_of[s2] >= 0 ? 1u << ev_of[s2] : 0u;
    }
  return w;
}

namespace {

struct Transition {
  int64_t s = 0, a = 0, s2 = 0;
  uint32_t label = 0;
};

Transition parse_transition(const std::string& line, const World& w) {
  std::istringstream in(line);
  Transition t;
  std::string evs, extra;
  TEMPER_CHECK(static_cast<bool>(in >> t.s >> t.a >> t.s2))
      << "world '" << w.name << "': transition '" << line << "': expected 's a s2' or 's a s2 event1,event2'";
  in >> evs >> extra;
  TEMPER_CHECK(extra.empty()) << "world '" << w.name << "': transition '" << line << "': unexpected '" << extra << "'";
  TEMPER_CHECK(t.s >= 0 && t.s < w.states && t.s2 >= 0 && t.s2 < w.states)
      << "world '" << w.name << "': transition '" << line << "': states are 0.." << w.states - 1;
  TEMPER_CHECK(t.a >= 0 && t.a < w.actions)
      << "world '" << w.name << "': transition '" << line << "': actions are 0.." << w.actions - 1;
  for (const std::string& e : split_words(evs)) {
    const int i = w.event_index(e);
    TEMPER_CHECK(i >= 0) << "world '" << w.name << "': transition '" << line << "': unknown event '" << e
                         << "' (events: " << w.event_list() << ")";
    t.label |= 1u << i;
  }
  return t;
}

}  // namespace

World world_from_graph(const GraphSpec& g, const std::string& name) {
  World w;
  w.name = name;
  w.states = g.states;
  w.actions = g.actions;
  w.start = g.start;
  w.events = g.events;
  TEMPER_CHECK(g.states > 0 && g.actions > 0)
      << "world '" << name << "': states and actions must be positive, got " << g.states << " and " << g.actions;
  TEMPER_CHECK(g.start >= 0 && g.start < g.states) << "world '" << name << "': start " << g.start << " is not a state";
  TEMPER_CHECK(g.events.size() <= 32) << "world '" << name << "': " << g.events.size() << " events; at most 32";
  w.next.assign(g.states * g.actions, -1);
  w.label.assign(g.states * g.actions, 0);
  for (const std::string& line : g.transitions) {
    const Transition t = parse_transition(line, w);
    int64_t& to = w.next[t.s * w.actions + t.a];
    uint32_t& lab = w.label[t.s * w.actions + t.a];
    if (to >= 0) {
      TEMPER_CHECK(to == t.s2 && lab == t.label)
          << "world '" << name << "': non-deterministic: state " << t.s << " action " << t.a << " leads to " << to
          << " (" << w.label_text(lab) << ") and to " << t.s2 << " (" << w.label_text(t.label)
          << "); Pareto Q-learning's set bootstrapping and tracking need a deterministic world";
      TEMPER_FAIL() << "world '" << name << "': state " << t.s << " action " << t.a << " is listed twice";
    }
    to = t.s2;
    lab = t.label;
  }
  for (int64_t s = 0; s < w.states; ++s) {
    w.state_names.push_back(std::to_string(s));
    for (int64_t a = 0; a < w.actions; ++a)
      TEMPER_CHECK(w.next[s * w.actions + a] >= 0)
          << "world '" << name << "': state " << s << " has no transition for action " << a
          << " (list every (state, action) once; a self-loop is 's a s')";
  }
  return w;
}

GridSpec builtin_grid(const std::string& name) {
  // c coffee, m mail, o office, * decoration, p plant.
  if (name == "office")
    return {{"c.......m",  //
             ".........",  //
             ".........",  //
             "##*###.##",  //
             ".........",  //
             "##.#o#*##",  //
             "....#....",  //
             ".........",  //
             "p...A...."},
            {"c=coffee", "m=mail", "o=office", "*=decoration", "p=plant"}};
  if (name == "office_small")
    return {{"c.*.m",  //
             ".#.#.",  //
             "..o..",  //
             ".#*#.",  //
             "..A.."},
            {"c=coffee", "m=mail", "o=office", "*=decoration", "p=plant"}};
  if (name == "corridor") return {{"m.*A.co"}, {"c=coffee", "m=mail", "o=office", "*=decoration", "p=plant"}};
  TEMPER_FAIL() << "unknown built-in world '" << name << "' (built-in: " << join_words(builtin_world_names(), ", ")
                << "; or world = \"grid\" with [tabular.grid] rows and legend)";
}

World builtin_world(const std::string& name) {
  return world_from_grid(builtin_grid(name), name);
}

std::vector<std::string> builtin_world_names() {
  return {"office", "office_small", "corridor"};
}

}  // namespace temper::tabular
