import CurfewCore

/// What the tray item shows for one status from the agent: the words, the icon, whether it needs
/// attention, and the menu. Pure: made from the status and what the child last did in the menu.
public struct IndicatorView: Sendable, Equatable {
    /// The icon's three faces.
    public enum Face: String, Sendable, Equatable, CaseIterable {
        case plenty, lastWarning = "warning", blocked

        /// Icon names: Curfew's own (packaging/icons), which hosts look up in the icon theme; the
        /// pixmap below stands in where they are not installed.
        public var iconName: String {
            switch self {
            case .plenty: "curfew-plenty"
            case .lastWarning: "curfew-warning"
            case .blocked: "curfew-blocked"
            }
        }

        /// ARGB of the pixmap's disc.
        var colour: (UInt8, UInt8, UInt8) {
            switch self {
            case .plenty: (0x2E, 0xA0, 0x43)
            case .lastWarning: (0xF0, 0x90, 0x00)
            case .blocked: (0xD0, 0x20, 0x20)
            }
        }
    }

    /// One entry of the menu (`com.canonical.dbusmenu` item properties).
    public struct Item: Sendable, Equatable {
        public var id: Int32
        public var label: String
        public var enabled: Bool
        public var separator: Bool

        public init(id: Int32, label: String, enabled: Bool = false, separator: Bool = false) {
            self.id = id
            self.label = label
            self.enabled = enabled
            self.separator = separator
        }
    }

    /// The menu's actions by item id.
    public enum Action: Sendable, Equatable {
        case ask(minutes: Int)
        case extend
        /// A parent, at the child's screen, types the parent's PIN to give this much more today.
        case approve(minutes: Int)
    }

    /// At most this much time left counts as the last warning (the default warnings are 15, 5 and 1 minutes).
    public static let lastWarningSeconds: Int64 = 5 * 60
    /// The most app rules listed in the menu.
    public static let maxRulesShown = 20

    public static let askItems: [(id: Int32, minutes: Int, label: String)] = [
        (101, 15, "Ask for 15 min"), (102, 30, "Ask for 30 min"), (103, 60, "Ask for 1 hour"),
    ]
    public static let extendItem: Int32 = 110
    /// Fixed amounts, as the child's own asks offer them: the PIN dialog hides what is typed, so it is
    /// no place to type an amount.
    public static let approveItems: [(id: Int32, minutes: Int, label: String)] = [
        (130, 15, "A parent approves 15 min here…"), (131, 30, "A parent approves 30 min here…"),
        (132, 60, "A parent approves 1 hour here…"),
    ]
    public static let answerItem: Int32 = 120

    public var title: String
    public var tooltipTitle: String
    public var tooltipText: String
    public var face: Face
    /// `Active` or `NeedsAttention`.
    public var status: String
    public var items: [Item]

    public static func action(for id: Int32, allowance: Bool) -> Action? {
        if let ask = askItems.first(where: { $0.id == id }) { return .ask(minutes: ask.minutes) }
        if id == extendItem && allowance { return .extend }
        if let approve = approveItems.first(where: { $0.id == id }) { return .approve(minutes: approve.minutes) }
        return nil
    }

    /// The view of `status`; `note` is the answer to what the child last asked from the menu.
    public static func make(_ status: StatusReport, note: String?) -> IndicatorView {
        let summary = ChildWords.summary(status)
        let face: Face =
            status.state != .allowed ? .blocked
            : (status.remainingSeconds.map { $0 <= lastWarningSeconds } ?? false) ? .lastWarning : .plenty
        var items: [Item] = [Item(id: 1, label: summary)]
        var details: [String] = []
        if let limit = status.limitMinutes {
            let used = ChildWords.duration(seconds: status.screenSeconds)
            let line = "Used \(status.screenSeconds < 60 ? "0 min" : used) of \(ChildWords.duration(seconds: Int64(limit) * 60)) today"
            details.append(line)
        }
        if status.extraMinutes > 0 {
            details.append("\(ChildWords.duration(seconds: Int64(status.extraMinutes) * 60)) extra granted today")
        }
        if status.bedtimeDelayMinutes > 0 {
            details.append("Bedtime \(ChildWords.duration(seconds: Int64(status.bedtimeDelayMinutes) * 60)) later tonight")
        }
        let windows = (status.blocked ?? []).map { window in
            "\(window.window.map { "downtime \($0)" } ?? window.state) \(window.start)-\(window.end)"
        }
        if !windows.isEmpty { details.append("Today: " + windows.joined(separator: ", ")) }
        for rule in (status.rules ?? []).prefix(maxRulesShown) { details.append(ChildWords.rule(rule)) }
        for (index, line) in details.enumerated() { items.append(Item(id: Int32(2 + index), label: line)) }
        items.append(Item(id: 90, label: "", separator: true))
        for ask in askItems { items.append(Item(id: ask.id, label: ask.label, enabled: true)) }
        if let allowance = status.selfExtension {
            items.append(
                Item(id: extendItem, label: "Use my own extra \(ChildWords.duration(seconds: Int64(allowance.minutes) * 60))", enabled: true))
        }
        items.append(Item(id: 91, label: "", separator: true))
        for approve in approveItems { items.append(Item(id: approve.id, label: approve.label, enabled: true)) }
        if let note { items.append(Item(id: answerItem, label: note)) }
        return IndicatorView(
            title: "Curfew: \(summary)", tooltipTitle: summary, tooltipText: details.prefix(6).joined(separator: "\n"), face: face,
            status: face == .plenty ? "Active" : "NeedsAttention", items: items)
    }

    /// The view before the agent has said anything (never registered: the item waits for a status).
    public static let waiting = IndicatorView(
        title: "Curfew", tooltipTitle: "Curfew", tooltipText: "", face: .plenty, status: "Active", items: [Item(id: 1, label: "Curfew")])

    /// A disc in the face's colour, `size` pixels square, ARGB32 in network byte order (as
    /// StatusNotifierItem's `IconPixmap` carries it).
    public static func pixmap(_ face: Face, size: Int = 24) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size * size * 4)
        let centre = Double(size - 1) / 2
        let radius = Double(size) / 2 - 1
        let (red, green, blue) = face.colour
        for y in 0..<size {
            for x in 0..<size {
                let distance = ((Double(x) - centre) * (Double(x) - centre) + (Double(y) - centre) * (Double(y) - centre)).squareRoot()
                let alpha: UInt8 = distance <= radius ? 0xFF : 0
                bytes += [alpha, red, green, blue]
            }
        }
        return bytes
    }
}
