import CurfewCore
import CurfewLinux

/// The StatusNotifierItem (`/StatusNotifierItem`, `org.kde.StatusNotifierItem`) and its menu
/// (`/MenuBar`, `com.canonical.dbusmenu`) on the session bus, as KDE's, Xfce's and the AppIndicator
/// hosts read them: properties through `org.freedesktop.DBus.Properties`, a `New*` signal for each
/// property that changed, and a menu whose layout is fetched again after `LayoutUpdated`.
final class TrayItem {
    static let itemPath = "/StatusNotifierItem"
    static let menuPath = "/MenuBar"
    static let itemInterface = "org.kde.StatusNotifierItem"
    static let menuInterface = "com.canonical.dbusmenu"
    static let watcherName = "org.kde.StatusNotifierWatcher"

    let bus: SDBus
    let serviceName: String
    private(set) var view: IndicatorView
    private(set) var revision: UInt32 = 1
    /// Called for a menu item clicked (after the Event call is answered).
    var onClick: (Int32) -> Void = { _ in }

    init(bus: SDBus, view: IndicatorView, pid: Int32) throws(LinuxSystemdError) {
        self.bus = bus
        self.view = view
        serviceName = "org.kde.StatusNotifierItem-\(pid)-1"
        try bus.requestName(serviceName)
        try bus.addObject(path: Self.itemPath) { [unowned self] message in self.handleItem(message) }
        try bus.addObject(path: Self.menuPath) { [unowned self] message in self.handleMenu(message) }
        // A watcher that starts (or restarts: the panel was restarted) is told about the item again.
        try bus.addMatch(
            "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(Self.watcherName)'"
        ) { [unowned self] message in
            guard let values = try? message.readAll(), values.count == 3, let owner = values[2].stringValue, !owner.isEmpty else { return }
            self.register()
        }
        register()
    }

    /// RegisterStatusNotifierItem with the watcher, without waiting (its host reads our properties
    /// while it handles the call); nothing when no watcher runs yet (NameOwnerChanged brings one).
    func register() {
        guard let message = try? bus.newMethodCall(
            destination: Self.watcherName, path: "/StatusNotifierWatcher", interface: Self.watcherName,
            member: "RegisterStatusNotifierItem")
        else { return }
        guard (try? message.append([.string(serviceName)])) != nil else { return }
        try? bus.callAsync(message)
    }

    /// Shows `new`: emits NewTitle, NewIcon, NewToolTip, NewStatus for what changed, and
    /// LayoutUpdated when the menu did.
    func show(_ new: IndicatorView) {
        let old = view
        view = new
        if old.title != new.title { signal("NewTitle") }
        if old.face != new.face { signal("NewIcon") }
        if old.tooltipTitle != new.tooltipTitle || old.tooltipText != new.tooltipText || old.face != new.face { signal("NewToolTip") }
        if old.status != new.status { signal("NewStatus", [.string(new.status)]) }
        if old.items != new.items {
            revision &+= 1
            if old.items.map(\.id) == new.items.map(\.id) {
                // The same entries with new words: their properties alone.
                let changed = zip(old.items, new.items).filter { $0 != $1 }.map { SDBusValue.structure([.int32($1.id), itemProperties($1, names: [])]) }
                try? bus.emitSignal(
                    path: Self.menuPath, interface: Self.menuInterface, member: "ItemsPropertiesUpdated",
                    [.array(elementSignature: "(ia{sv})", changed), .array(elementSignature: "(ias)", [])])
            } else {
                try? bus.emitSignal(path: Self.menuPath, interface: Self.menuInterface, member: "LayoutUpdated", [.uint32(revision), .int32(0)])
            }
        }
        try? bus.flush()
    }

    private func signal(_ member: String, _ values: [SDBusValue] = []) {
        try? bus.emitSignal(path: Self.itemPath, interface: Self.itemInterface, member: member, values)
    }

    // MARK: the item

    var itemProperties: [(String, SDBusValue)] {
        let pixmap = SDBusValue.array(
            elementSignature: "(iiay)",
            [.structure([.int32(24), .int32(24), .array(elementSignature: "y", IndicatorView.pixmap(view.face).map { .byte($0) })])])
        return [
            ("Category", .string("SystemServices")),
            ("Id", .string("curfew")),
            ("Title", .string(view.title)),
            ("Status", .string(view.status)),
            ("WindowId", .int32(0)),
            ("IconName", .string(view.face.iconName)),
            ("IconPixmap", pixmap),
            ("IconThemePath", .string("")),
            ("OverlayIconName", .string("")),
            ("OverlayIconPixmap", .array(elementSignature: "(iiay)", [])),
            ("AttentionIconName", .string(view.face.iconName)),
            ("AttentionIconPixmap", pixmap),
            ("AttentionMovieName", .string("")),
            ("ToolTip", .structure([.string(view.face.iconName), pixmap, .string(view.tooltipTitle), .string(view.tooltipText)])),
            ("ItemIsMenu", .bool(true)),
            ("Menu", .objectPath(Self.menuPath)),
        ]
    }

    var menuProperties: [(String, SDBusValue)] {
        [("Version", .uint32(3)), ("TextDirection", .string("ltr")), ("Status", .string("normal")),
         ("IconThemePath", .array(elementSignature: "s", []))]
    }

    private func handleItem(_ message: SDBusMessage) -> Bool {
        guard message.isMethodCall else { return false }
        switch (message.interface, message.member) {
        case ("org.freedesktop.DBus.Properties", let member?):
            return properties(message, member: member, interface: Self.itemInterface, itemProperties)
        case ("org.freedesktop.DBus.Introspectable", "Introspect"):
            try? bus.reply(to: message, [.string(Self.itemIntrospection)])
            return true
        case (Self.itemInterface, "Activate"?), (Self.itemInterface, "SecondaryActivate"?), (Self.itemInterface, "ContextMenu"?),
            (Self.itemInterface, "Scroll"?):
            // The menu is the item (ItemIsMenu): a click opens it in the host; nothing else to do.
            try? bus.reply(to: message)
            return true
        default:
            return false
        }
    }

    private func properties(
        _ message: SDBusMessage, member: String, interface: String, _ all: [(String, SDBusValue)]
    ) -> Bool {
        let arguments = (try? message.readAll()) ?? []
        switch member {
        case "GetAll":
            let asked = arguments.first?.stringValue ?? ""
            let entries = asked == interface || asked.isEmpty ? all : []
            try? bus.reply(to: message, [.array(elementSignature: "{sv}", entries.map { .dictEntry(.string($0.0), .variant($0.1)) })])
        case "Get":
            guard arguments.count == 2, let name = arguments[1].stringValue, let value = all.first(where: { $0.0 == name })?.1 else {
                try? bus.replyError(to: message, name: "org.freedesktop.DBus.Error.UnknownProperty", message: "no such property")
                return true
            }
            try? bus.reply(to: message, [.variant(value)])
        case "Set":
            try? bus.replyError(to: message, name: "org.freedesktop.DBus.Error.PropertyReadOnly", message: "the properties are read-only")
        default:
            return false
        }
        return true
    }

    // MARK: the menu

    func itemProperties(_ item: IndicatorView.Item, names: Set<String>) -> SDBusValue {
        var entries: [(String, SDBusValue)] = []
        if item.separator {
            entries.append(("type", .string("separator")))
        } else {
            entries.append(("label", .string(item.label.split(separator: "_", omittingEmptySubsequences: false).joined(separator: "__"))))
            entries.append(("enabled", .bool(item.enabled)))
        }
        entries.append(("visible", .bool(true)))
        if !names.isEmpty { entries = entries.filter { names.contains($0.0) } }
        return .array(elementSignature: "{sv}", entries.map { .dictEntry(.string($0.0), .variant($0.1)) })
    }

    func layout(names: Set<String>) -> SDBusValue {
        let children = view.items.map { item in
            SDBusValue.variant(.structure([.int32(item.id), itemProperties(item, names: names), .array(elementSignature: "v", [])]))
        }
        let root = SDBusValue.array(elementSignature: "{sv}", [.dictEntry(.string("children-display"), .variant(.string("submenu")))])
        return .structure([.int32(0), root, .array(elementSignature: "v", children)])
    }

    private func handleMenu(_ message: SDBusMessage) -> Bool {
        guard message.isMethodCall else { return false }
        let arguments = (try? message.readAll()) ?? []
        switch (message.interface, message.member) {
        case ("org.freedesktop.DBus.Properties", let member?):
            try? message.rewind()
            return properties(message, member: member, interface: Self.menuInterface, menuProperties)
        case ("org.freedesktop.DBus.Introspectable", "Introspect"):
            try? bus.reply(to: message, [.string(Self.menuIntrospection)])
        case (Self.menuInterface, "GetLayout"?):
            guard arguments.count == 3, case .int32(let parent) = arguments[0] else { return invalid(message) }
            let names = Set(Self.strings(arguments[2]))
            if parent == 0 {
                try? bus.reply(to: message, [.uint32(revision), layout(names: names)])
            } else if let item = view.items.first(where: { $0.id == parent }) {
                try? bus.reply(
                    to: message,
                    [.uint32(revision), .structure([.int32(item.id), itemProperties(item, names: names), .array(elementSignature: "v", [])])])
            } else {
                try? bus.replyError(to: message, name: "org.freedesktop.DBus.Error.InvalidArgs", message: "no menu item \(parent)")
            }
        case (Self.menuInterface, "GetGroupProperties"?):
            guard arguments.count == 2, case .array(_, let ids) = arguments[0] else { return invalid(message) }
            let names = Set(Self.strings(arguments[1]))
            let wanted = Set(ids.compactMap { if case .int32(let id) = $0 { id } else { nil } })
            let entries = view.items.filter { wanted.isEmpty || wanted.contains($0.id) }.map {
                SDBusValue.structure([.int32($0.id), itemProperties($0, names: names)])
            }
            try? bus.reply(to: message, [.array(elementSignature: "(ia{sv})", entries)])
        case (Self.menuInterface, "GetProperty"?):
            guard arguments.count == 2, case .int32(let id) = arguments[0], let name = arguments[1].stringValue,
                let item = view.items.first(where: { $0.id == id }),
                case .array(_, let entries) = itemProperties(item, names: [name]),
                case .dictEntry(_, let value)? = entries.first
            else {
                try? bus.replyError(to: message, name: "org.freedesktop.DBus.Error.InvalidArgs", message: "no such item or property")
                return true
            }
            try? bus.reply(to: message, [value])
        case (Self.menuInterface, "Event"?):
            guard arguments.count == 4, case .int32(let id) = arguments[0], let event = arguments[1].stringValue else { return invalid(message) }
            try? bus.reply(to: message)
            try? bus.flush()
            if event == "clicked" { onClick(id) }
        case (Self.menuInterface, "EventGroup"?):
            guard arguments.count == 1, case .array(_, let events) = arguments[0] else { return invalid(message) }
            try? bus.reply(to: message, [.array(elementSignature: "i", [])])
            try? bus.flush()
            for case .structure(let fields) in events where fields.count == 4 {
                if case .int32(let id) = fields[0], fields[1].stringValue == "clicked" { onClick(id) }
            }
        case (Self.menuInterface, "AboutToShow"?):
            // The layout is always current: LayoutUpdated went out with every change.
            try? bus.reply(to: message, [.bool(false)])
        case (Self.menuInterface, "AboutToShowGroup"?):
            try? bus.reply(to: message, [.array(elementSignature: "i", []), .array(elementSignature: "i", [])])
        default:
            return false
        }
        return true
    }

    private func invalid(_ message: SDBusMessage) -> Bool {
        try? bus.replyError(to: message, name: "org.freedesktop.DBus.Error.InvalidArgs", message: "unexpected arguments \(message.signature)")
        return true
    }

    private static func strings(_ value: SDBusValue) -> [String] {
        guard case .array(_, let elements) = value else { return [] }
        return elements.compactMap(\.stringValue)
    }

    static let itemIntrospection = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
        <node>
          <interface name="org.kde.StatusNotifierItem">
            <property name="Category" type="s" access="read"/>
            <property name="Id" type="s" access="read"/>
            <property name="Title" type="s" access="read"/>
            <property name="Status" type="s" access="read"/>
            <property name="WindowId" type="i" access="read"/>
            <property name="IconName" type="s" access="read"/>
            <property name="IconPixmap" type="a(iiay)" access="read"/>
            <property name="IconThemePath" type="s" access="read"/>
            <property name="OverlayIconName" type="s" access="read"/>
            <property name="OverlayIconPixmap" type="a(iiay)" access="read"/>
            <property name="AttentionIconName" type="s" access="read"/>
            <property name="AttentionIconPixmap" type="a(iiay)" access="read"/>
            <property name="AttentionMovieName" type="s" access="read"/>
            <property name="ToolTip" type="(sa(iiay)ss)" access="read"/>
            <property name="ItemIsMenu" type="b" access="read"/>
            <property name="Menu" type="o" access="read"/>
            <method name="ContextMenu"><arg name="x" type="i" direction="in"/><arg name="y" type="i" direction="in"/></method>
            <method name="Activate"><arg name="x" type="i" direction="in"/><arg name="y" type="i" direction="in"/></method>
            <method name="SecondaryActivate"><arg name="x" type="i" direction="in"/><arg name="y" type="i" direction="in"/></method>
            <method name="Scroll"><arg name="delta" type="i" direction="in"/><arg name="orientation" type="s" direction="in"/></method>
            <signal name="NewTitle"/>
            <signal name="NewIcon"/>
            <signal name="NewAttentionIcon"/>
            <signal name="NewOverlayIcon"/>
            <signal name="NewToolTip"/>
            <signal name="NewStatus"><arg name="status" type="s"/></signal>
          </interface>
          <interface name="org.freedesktop.DBus.Properties">
            <method name="Get"><arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="v" direction="out"/></method>
            <method name="GetAll"><arg type="s" direction="in"/><arg type="a{sv}" direction="out"/></method>
          </interface>
        </node>
        """

    static let menuIntrospection = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
        <node>
          <interface name="com.canonical.dbusmenu">
            <property name="Version" type="u" access="read"/>
            <property name="TextDirection" type="s" access="read"/>
            <property name="Status" type="s" access="read"/>
            <property name="IconThemePath" type="as" access="read"/>
            <method name="GetLayout">
              <arg type="i" name="parentId" direction="in"/><arg type="i" name="recursionDepth" direction="in"/>
              <arg type="as" name="propertyNames" direction="in"/><arg type="u" name="revision" direction="out"/>
              <arg type="(ia{sv}av)" name="layout" direction="out"/>
            </method>
            <method name="GetGroupProperties">
              <arg type="ai" name="ids" direction="in"/><arg type="as" name="propertyNames" direction="in"/>
              <arg type="a(ia{sv})" name="properties" direction="out"/>
            </method>
            <method name="GetProperty">
              <arg type="i" name="id" direction="in"/><arg type="s" name="name" direction="in"/><arg type="v" name="value" direction="out"/>
            </method>
            <method name="Event">
              <arg type="i" name="id" direction="in"/><arg type="s" name="eventId" direction="in"/>
              <arg type="v" name="data" direction="in"/><arg type="u" name="timestamp" direction="in"/>
            </method>
            <method name="EventGroup">
              <arg type="a(isvu)" name="events" direction="in"/><arg type="ai" name="idErrors" direction="out"/>
            </method>
            <method name="AboutToShow"><arg type="i" name="id" direction="in"/><arg type="b" name="needUpdate" direction="out"/></method>
            <method name="AboutToShowGroup">
              <arg type="ai" name="ids" direction="in"/><arg type="ai" name="updatesNeeded" direction="out"/>
              <arg type="ai" name="idErrors" direction="out"/>
            </method>
            <signal name="ItemsPropertiesUpdated">
              <arg type="a(ia{sv})" name="updatedProps"/><arg type="a(ias)" name="removedProps"/>
            </signal>
            <signal name="LayoutUpdated"><arg type="u" name="revision"/><arg type="i" name="parent"/></signal>
            <signal name="ItemActivationRequested"><arg type="i" name="id"/><arg type="u" name="timestamp"/></signal>
          </interface>
        </node>
        """
}
