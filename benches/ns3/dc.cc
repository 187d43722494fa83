// ns-3 (3.37) side of the fabriclab comparison harness (benches/ns3/README.md).
//
// Reads a case file written by benches/ns3/flows.py (one "key value" pair per
// line, '#' comments) and its flow list (CSV: flow_id,src,dst,size_bytes,
// start_ps,class,spine), builds a star or a two-tier leaf-spine of
// point-to-point links, runs every flow as one TCP connection (DCTCP with
// step-marking RED, or NewReno with drop-tail), and writes one row per flow:
//   flow_id,size_bytes,start_ps,data_start_ps,end_ps,fct_ps,fct_data_ps
// fct_ps counts from the flow's start (handshake included); fct_data_ps from
// the moment the sender's connection succeeded (first data can leave).
// Writes per egress port packets, ECN marks and drops (--links), and prints
// one JSON line: wall time of Simulator::Run, events, marks, drops.
//
// Routing: every flow is routed by the generator (its "spine" column), never
// by ns-3's ECMP (per-packet random in 3.37). Each host carries one address per
// spine, 10.(k+1).leaf.(slot+1); a flow's sender binds to its spine-k address
// and connects to the receiver's spine-k address, and static routes send
// 10.(k+1).L.0/24 up to spine k from every other leaf, so data and ACKs of the
// flow both cross spine k.

#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace ns3;

namespace
{

const uint16_t kDstPort = 5001;

struct Flow
{
    uint32_t id;
    uint32_t src;
    uint32_t dst;
    uint64_t size;
    uint64_t start_ps;
    uint8_t cls;
    int32_t spine; // -1: no spine (same leaf, or a star)
    uint64_t rx = 0;
    int64_t data_start_ps = -1;
    int64_t end_ps = -1;
    uint64_t sent = 0;
    Ptr<Socket> tx;
};

[[noreturn]] void
Fail(const std::string& msg)
{
    throw std::runtime_error(msg);
}

std::map<std::string, std::string>
ReadCase(const std::string& path)
{
    std::ifstream in(path);
    if (!in)
    {
        Fail(path + ": cannot read the case file");
    }
    std::map<std::string, std::string> kv;
    std::string line;
    while (std::getline(in, line))
    {
        line = line.substr(0, line.find('#'));
        std::istringstream ls(line);
        std::string key;
        if (!(ls >> key))
        {
            continue;
        }
        std::string rest;
        std::getline(ls, rest);
        size_t b = rest.find_first_not_of(" \t");
        kv[key] = b == std::string::npos ? "" : rest.substr(b);
    }
    return kv;
}

std::string
Need(const std::map<std::string, std::string>& kv, const std::string& key)
{
    auto it = kv.find(key);
    if (it == kv.end())
    {
        Fail("case file: missing key '" + key + "'");
    }
    return it->second;
}

uint64_t
NeedU(const std::map<std::string, std::string>& kv, const std::string& key)
{
    std::string v = Need(kv, key);
    try
    {
        size_t n = 0;
        unsigned long long x = std::stoull(v, &n);
        if (n != v.size())
        {
            Fail("");
        }
        return x;
    }
    catch (...)
    {
        Fail("case file: " + key + ": expected a non-negative integer, got '" + v + "'");
    }
}

std::vector<Flow>
ReadFlows(const std::string& path)
{
    std::ifstream in(path);
    if (!in)
    {
        Fail(path + ": cannot read the flow list");
    }
    std::vector<Flow> flows;
    std::string line;
    std::getline(in, line);
    if (line != "flow_id,src,dst,size_bytes,start_ps,class,spine")
    {
        Fail(path + ": header must be flow_id,src,dst,size_bytes,start_ps,class,spine");
    }
    uint32_t row = 1;
    while (std::getline(in, line))
    {
        ++row;
        if (line.empty())
        {
            continue;
        }
        Flow f{};
        unsigned cls = 0;
        long long spine = 0;
        unsigned long long size = 0, start = 0;
        if (std::sscanf(line.c_str(),
                        "%u,%u,%u,%llu,%llu,%u,%lld",
                        &f.id,
                        &f.src,
                        &f.dst,
                        &size,
                        &start,
                        &cls,
                        &spine) != 7)
        {
            Fail(path + ": row " + std::to_string(row) + ": expected 7 integers");
        }
        if (f.id != flows.size())
        {
            Fail(path + ": row " + std::to_string(row) + ": flow_id must be the row index");
        }
        f.size = size;
        f.start_ps = start;
        f.cls = static_cast<uint8_t>(cls);
        f.spine = static_cast<int32_t>(spine);
        flows.push_back(f);
    }
    return flows;
}

// Strict priority: the band of a packet is its flow's class's band. ns-3's own
// way (socket priority re-derived from the IP TOS at every router) needs a
// non-zero TOS, which leaves SYNs not ECN-capable (TcpSocketBase::AddSocketTags),
// and RED drops those above K; a filter on the flow's port changes no packet.
class FlowBandFilter : public Ipv4PacketFilter
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("FabriclabFlowBandFilter")
                                .SetParent<Ipv4PacketFilter>()
                                .AddConstructor<FlowBandFilter>();
        return tid;
    }

    std::vector<int32_t> bandOfFlow; // indexed by flow id

  private:
    int32_t DoClassify(Ptr<QueueDiscItem> item) const override
    {
        TcpHeader th;
        if (item->GetPacket()->PeekHeader(th) == 0)
        {
            return PacketFilter::PF_NO_MATCH;
        }
        // A flow's sender uses source port 1024 + its id; the receiver listens on kDstPort.
        uint16_t port = th.GetSourcePort() == kDstPort ? th.GetDestinationPort() : th.GetSourcePort();
        uint32_t id = uint32_t(port) - 1024;
        return port >= 1024 && id < bandOfFlow.size() ? bandOfFlow[id] : PacketFilter::PF_NO_MATCH;
    }
};

class Harness
{
  public:
    explicit Harness(const std::map<std::string, std::string>& kv);
    void Run(const std::string& out, const std::string& linksOut);

  private:
    void Build();
    void InstallQueues(NetDeviceContainer devs);
    Ipv4Address HostAddr(uint32_t host, uint32_t k) const;
    void StartFlow(uint32_t i);
    void Connected(Ptr<Socket> s);
    void ConnectFailed(Ptr<Socket> s);
    void SendMore(Ptr<Socket> s, uint32_t);
    void Accept(Ptr<Socket> s, const Address& from);
    void Recv(Ptr<Socket> s);

    std::map<std::string, std::string> m_kv;
    std::string m_topo;
    uint32_t m_leaves = 1;
    uint32_t m_hpl = 0;
    uint32_t m_spines = 0;
    std::vector<Flow> m_flows;
    NodeContainer m_hosts;
    NodeContainer m_leafNodes;
    NodeContainer m_spineNodes;
    struct Port
    {
        std::string from; // fabriclab's node names
        std::string to;
        bool host;
        Ptr<QueueDisc> qdisc;
    };
    std::string NodeName(uint32_t id) const;
    std::vector<Port> m_ports;
    std::map<Socket*, uint32_t> m_txIndex;
    std::map<Socket*, uint32_t> m_rxIndex;
    std::map<std::pair<uint32_t, uint16_t>, uint32_t> m_byPeer;
    uint32_t m_done = 0;
    Ptr<FlowBandFilter> m_filter;
};

Harness::Harness(const std::map<std::string, std::string>& kv)
    : m_kv(kv)
{
    m_topo = Need(kv, "topology");
    if (m_topo == "star")
    {
        m_hpl = NeedU(kv, "hosts");
    }
    else if (m_topo == "leaf_spine")
    {
        m_leaves = NeedU(kv, "leaves");
        m_hpl = NeedU(kv, "hosts_per_leaf");
        m_spines = NeedU(kv, "spines");
        if (m_leaves < 1 || m_leaves > 250 || m_spines < 1 || m_spines > 250)
        {
            Fail("case file: leaves and spines must be within 1..250");
        }
    }
    else
    {
        Fail("case file: topology must be star or leaf_spine, got '" + m_topo + "'");
    }
    if (m_hpl < 1 || m_leaves * m_hpl < 2 || m_hpl > 250)
    {
        Fail("case file: hosts (per leaf) must be within 1..250, and 2 hosts at least");
    }
    m_flows = ReadFlows(Need(kv, "flows_csv"));
    uint64_t bands = NeedU(kv, "bands");
    std::istringstream pm(Need(kv, "priomap"));
    std::vector<int32_t> bandOfClass;
    for (unsigned v; bandOfClass.size() < 8 && pm >> v;)
    {
        bandOfClass.push_back(int32_t(v));
    }
    if (bands < 1 || bands > 8 || bandOfClass.size() != 8)
    {
        Fail("case file: bands must be within 1..8 and priomap list 8 bands (classes 0..7)");
    }
    m_filter = CreateObject<FlowBandFilter>();
    for (const Flow& f : m_flows)
    {
        m_filter->bandOfFlow.push_back(std::min<int32_t>(bandOfClass[f.cls], int32_t(bands) - 1));
    }
    uint32_t nh = m_leaves * m_hpl;
    for (const Flow& f : m_flows)
    {
        std::string where = "flow " + std::to_string(f.id) + ": ";
        if (f.src >= nh || f.dst >= nh || f.src == f.dst)
        {
            Fail(where + "src and dst must be distinct hosts below " + std::to_string(nh));
        }
        bool same = f.src / m_hpl == f.dst / m_hpl;
        if (same ? f.spine != -1 : (f.spine < 0 || f.spine >= int32_t(m_spines)))
        {
            Fail(where + "spine must be -1 within a leaf, else within 0.." +
                 std::to_string(m_spines) + " (exclusive)");
        }
        if (f.size == 0 || f.cls > 7)
        {
            Fail(where + "size_bytes must be > 0 and class within 0..7");
        }
        if (f.id >= 64000)
        {
            Fail("flow list: at most 64000 flows (one source port each)");
        }
    }
}

Ipv4Address
Harness::HostAddr(uint32_t host, uint32_t k) const
{
    uint32_t leaf = host / m_hpl;
    uint32_t slot = host % m_hpl;
    return Ipv4Address((10u << 24) | ((k + 1) << 16) | (leaf << 8) | (slot + 1));
}

void
Harness::InstallQueues(NetDeviceContainer devs)
{
    std::string qdisc = Need(m_kv, "queue");
    if (qdisc != "red" && qdisc != "fifo")
    {
        Fail("case file: queue must be red or fifo, got '" + qdisc + "'");
    }
    uint64_t bands = NeedU(m_kv, "bands");
    QueueSizeValue maxSize(QueueSize(std::to_string(NeedU(m_kv, "limit_packets")) + "p"));
    TrafficControlHelper tch;
    uint16_t handle = 0;
    TrafficControlHelper::ClassIdList cids;
    if (bands > 1)
    {
        // Strict priority: FlowBandFilter gives each packet its flow's band.
        handle = tch.SetRootQueueDisc("ns3::PrioQueueDisc");
        cids = tch.AddQueueDiscClasses(handle, uint16_t(bands), "ns3::QueueDiscClass");
    }
    // One band: the root queue disc; several: a child per PrioQueueDisc class.
    auto put = [&](size_t b, const std::string& type, auto&&... args) {
        if (bands > 1)
        {
            tch.AddChildQueueDisc(handle, cids[b], type, args...);
        }
        else
        {
            tch.SetRootQueueDisc(type, args...);
        }
    };
    for (size_t b = 0; b < bands; ++b)
    {
        if (qdisc == "red")
        {
            // DCTCP step marking: an ECT packet arriving while the queue disc
            // holds >= K packets is marked (MinTh = MaxTh = K, QW = 1; Gentle
            // off, else marking is probabilistic between K and 2K).
            DoubleValue k(double(NeedU(m_kv, "ecn_threshold_packets")));
            put(b,
                "ns3::RedQueueDisc",
                "MinTh",
                k,
                "MaxTh",
                k,
                "QW",
                DoubleValue(1.0),
                "Gentle",
                BooleanValue(false),
                "UseEcn",
                BooleanValue(true),
                "UseHardDrop",
                BooleanValue(false),
                "MeanPktSize",
                UintegerValue(1500),
                "MaxSize",
                maxSize);
        }
        else
        {
            put(b, "ns3::FifoQueueDisc", "MaxSize", maxSize);
        }
    }
    QueueDiscContainer qds = tch.Install(devs);
    for (uint32_t i = 0; i < qds.GetN(); ++i)
    {
        if (bands > 1)
        {
            qds.Get(i)->AddPacketFilter(m_filter);
        }
        uint32_t from = devs.Get(i)->GetNode()->GetId();
        uint32_t to = devs.Get(1 - i)->GetNode()->GetId();
        m_ports.push_back({NodeName(from), NodeName(to), from < m_hosts.GetN(), qds.Get(i)});
    }
}

std::string
Harness::NodeName(uint32_t id) const
{
    uint32_t nh = m_leaves * m_hpl;
    if (id < nh)
    {
        return "h" + std::to_string(id);
    }
    if (m_topo == "star")
    {
        return "s0";
    }
    if (id < nh + m_leaves)
    {
        return "leaf" + std::to_string(id - nh);
    }
    return "spine" + std::to_string(id - nh - m_leaves);
}

void
Harness::Build()
{
    uint32_t nh = m_leaves * m_hpl;
    m_hosts.Create(nh);
    m_leafNodes.Create(m_leaves);
    m_spineNodes.Create(m_spines);

    InternetStackHelper stack;
    Ipv4StaticRoutingHelper staticRouting;
    stack.SetRoutingHelper(staticRouting);
    stack.Install(m_hosts);
    stack.Install(m_leafNodes);
    stack.Install(m_spineNodes);

    // The device's own TxQueue holds one packet: the queue disc above holds the queue.
    PointToPointHelper hostLink;
    hostLink.SetDeviceAttribute("DataRate",
                                DataRateValue(DataRate(NeedU(m_kv, "host_link_rate_bps"))));
    hostLink.SetChannelAttribute("Delay", TimeValue(PicoSeconds(NeedU(m_kv, "link_delay_ps"))));
    hostLink.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("1p"));
    PointToPointHelper spineLink = hostLink;
    if (m_spines > 0)
    {
        spineLink.SetDeviceAttribute(
            "DataRate",
            DataRateValue(DataRate(NeedU(m_kv, "spine_link_rate_bps"))));
    }

    Ipv4AddressHelper linkNet("172.16.0.0", "255.255.255.252");
    std::vector<uint32_t> hostIf(nh);           // host's interface toward its leaf
    std::vector<uint32_t> leafDownIf(nh);       // leaf's interface toward host
    std::vector<std::vector<uint32_t>> leafUpIf(m_leaves, std::vector<uint32_t>(m_spines));
    std::vector<std::vector<uint32_t>> spineDownIf(m_spines, std::vector<uint32_t>(m_leaves));
    auto ifOf = [](Ptr<NetDevice> d) {
        return uint32_t(d->GetNode()->GetObject<Ipv4>()->GetInterfaceForDevice(d));
    };
    for (uint32_t h = 0; h < nh; ++h)
    {
        NetDeviceContainer d = hostLink.Install(m_hosts.Get(h), m_leafNodes.Get(h / m_hpl));
        InstallQueues(d); // before addresses: else ns-3 installs FqCoDel
        linkNet.Assign(d);
        linkNet.NewNetwork();
        hostIf[h] = ifOf(d.Get(0));
        leafDownIf[h] = ifOf(d.Get(1));
    }
    for (uint32_t l = 0; l < m_leaves; ++l)
    {
        for (uint32_t k = 0; k < m_spines; ++k)
        {
            NetDeviceContainer d = spineLink.Install(m_leafNodes.Get(l), m_spineNodes.Get(k));
            InstallQueues(d);
            linkNet.Assign(d);
            linkNet.NewNetwork();
            leafUpIf[l][k] = ifOf(d.Get(0));
            spineDownIf[k][l] = ifOf(d.Get(1));
        }
    }

    uint32_t paths = m_spines > 0 ? m_spines : 1;
    for (uint32_t h = 0; h < nh; ++h)
    {
        Ptr<Ipv4> ip = m_hosts.Get(h)->GetObject<Ipv4>();
        for (uint32_t k = 0; k < paths; ++k)
        {
            // A /16 per spine: ns-3 sets a connection's source address from
            // the route (Ipv4L3Protocol::SourceAddressSelection picks the
            // interface address in the destination's subnet), not from Bind.
            ip->AddAddress(hostIf[h], Ipv4InterfaceAddress(HostAddr(h, k), "255.255.0.0"));
        }
        staticRouting.GetStaticRouting(ip)->AddNetworkRouteTo("0.0.0.0", "0.0.0.0", hostIf[h]);
    }
    for (uint32_t l = 0; l < m_leaves; ++l)
    {
        Ptr<Ipv4StaticRouting> r =
            staticRouting.GetStaticRouting(m_leafNodes.Get(l)->GetObject<Ipv4>());
        for (uint32_t h = l * m_hpl; h < (l + 1) * m_hpl; ++h)
        {
            for (uint32_t k = 0; k < paths; ++k)
            {
                r->AddHostRouteTo(HostAddr(h, k), leafDownIf[h]);
            }
        }
        for (uint32_t other = 0; other < m_leaves; ++other)
        {
            for (uint32_t k = 0; other != l && k < m_spines; ++k)
            {
                r->AddNetworkRouteTo(HostAddr(other * m_hpl, k).CombineMask("255.255.255.0"),
                                     "255.255.255.0",
                                     leafUpIf[l][k]);
            }
        }
    }
    for (uint32_t k = 0; k < m_spines; ++k)
    {
        Ptr<Ipv4StaticRouting> r =
            staticRouting.GetStaticRouting(m_spineNodes.Get(k)->GetObject<Ipv4>());
        for (uint32_t l = 0; l < m_leaves; ++l)
        {
            r->AddNetworkRouteTo(HostAddr(l * m_hpl, k).CombineMask("255.255.255.0"),
                                 "255.255.255.0",
                                 spineDownIf[k][l]);
        }
    }

    for (uint32_t h = 0; h < nh; ++h)
    {
        Ptr<Socket> listen = Socket::CreateSocket(m_hosts.Get(h), TcpSocketFactory::GetTypeId());
        listen->Bind(InetSocketAddress(Ipv4Address::GetAny(), kDstPort));
        listen->Listen();
        listen->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                                  MakeCallback(&Harness::Accept, this));
    }
    for (uint32_t i = 0; i < m_flows.size(); ++i)
    {
        const Flow& f = m_flows[i];
        m_byPeer[{HostAddr(f.src, f.spine < 0 ? 0 : f.spine).Get(), uint16_t(1024 + f.id)}] = i;
        Simulator::Schedule(PicoSeconds(f.start_ps), &Harness::StartFlow, this, i);
    }
}

void
Harness::StartFlow(uint32_t i)
{
    Flow& f = m_flows[i];
    uint32_t k = f.spine < 0 ? 0 : f.spine;
    f.tx = Socket::CreateSocket(m_hosts.Get(f.src), TcpSocketFactory::GetTypeId());
    if (f.tx->Bind(InetSocketAddress(HostAddr(f.src, k), uint16_t(1024 + f.id))) != 0)
    {
        Fail("flow " + std::to_string(f.id) + ": bind failed");
    }
    m_txIndex[PeekPointer(f.tx)] = i;
    f.tx->SetConnectCallback(MakeCallback(&Harness::Connected, this),
                             MakeCallback(&Harness::ConnectFailed, this));
    f.tx->SetSendCallback(MakeCallback(&Harness::SendMore, this));
    f.tx->Connect(InetSocketAddress(HostAddr(f.dst, k), kDstPort));
}

void
Harness::Connected(Ptr<Socket> s)
{
    Flow& f = m_flows[m_txIndex.at(PeekPointer(s))];
    f.data_start_ps = Simulator::Now().GetPicoSeconds();
    SendMore(s, 0);
}

void
Harness::ConnectFailed(Ptr<Socket> s)
{
    Fail("flow " + std::to_string(m_txIndex.at(PeekPointer(s))) + ": connection failed");
}

void
Harness::SendMore(Ptr<Socket> s, uint32_t)
{
    Flow& f = m_flows[m_txIndex.at(PeekPointer(s))];
    if (f.data_start_ps < 0)
    {
        return;
    }
    while (f.sent < f.size)
    {
        uint64_t n = std::min<uint64_t>(f.size - f.sent, s->GetTxAvailable());
        if (n == 0)
        {
            return;
        }
        int r = s->Send(Create<Packet>(uint32_t(n)));
        if (r <= 0)
        {
            return;
        }
        f.sent += uint64_t(r);
    }
}

void
Harness::Accept(Ptr<Socket> s, const Address& from)
{
    InetSocketAddress peer = InetSocketAddress::ConvertFrom(from);
    auto it = m_byPeer.find({peer.GetIpv4().Get(), peer.GetPort()});
    if (it == m_byPeer.end())
    {
        std::ostringstream os;
        os << "connection from an unknown peer " << peer.GetIpv4() << ":" << peer.GetPort();
        Fail(os.str());
    }
    m_rxIndex[PeekPointer(s)] = it->second;
    s->SetRecvCallback(MakeCallback(&Harness::Recv, this));
}

void
Harness::Recv(Ptr<Socket> s)
{
    Flow& f = m_flows[m_rxIndex.at(PeekPointer(s))];
    while (Ptr<Packet> p = s->Recv())
    {
        f.rx += p->GetSize();
    }
    if (f.end_ps < 0 && f.rx >= f.size)
    {
        f.end_ps = Simulator::Now().GetPicoSeconds();
        if (++m_done == m_flows.size())
        {
            Simulator::Stop();
        }
    }
}

void
Harness::Run(const std::string& out, const std::string& linksOut)
{
    Build();
    Simulator::Stop(PicoSeconds(NeedU(m_kv, "stop_ps")));
    auto t0 = std::chrono::steady_clock::now();
    Simulator::Run();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    uint64_t events = Simulator::GetEventCount();
    uint64_t now_ps = Simulator::Now().GetPicoSeconds();

    std::ofstream o(out);
    o << "flow_id,size_bytes,start_ps,data_start_ps,end_ps,fct_ps,fct_data_ps\n";
    for (const Flow& f : m_flows)
    {
        o << f.id << ',' << f.size << ',' << f.start_ps << ',';
        if (f.end_ps < 0)
        {
            o << (f.data_start_ps < 0 ? "" : std::to_string(f.data_start_ps)) << ",,,\n";
            continue;
        }
        o << f.data_start_ps << ',' << f.end_ps << ',' << (f.end_ps - int64_t(f.start_ps)) << ','
          << (f.end_ps - f.data_start_ps) << '\n';
    }
    // Per egress port: packets sent, ECN marks, drops (queue disc counters).
    std::ofstream lo(linksOut);
    lo << "src_node,dst_node,packets,ecn_marks,drops\n";
    uint64_t marks[2] = {0, 0};
    uint64_t drops[2] = {0, 0};
    for (const Port& p : m_ports)
    {
        const QueueDisc::Stats& st = p.qdisc->GetStats();
        lo << p.from << ',' << p.to << ',' << st.nTotalSentPackets << ','
           << st.nTotalMarkedPackets << ',' << st.nTotalDroppedPackets << '\n';
        marks[p.host] += st.nTotalMarkedPackets;
        drops[p.host] += st.nTotalDroppedPackets;
    }
    std::printf("{\"wall_s\": %.6f, \"events\": %llu, \"sim_end_ps\": %llu, \"flows\": %zu, "
                "\"finished\": %u, \"switch_marks\": %llu, \"switch_drops\": %llu, "
                "\"host_marks\": %llu, \"host_drops\": %llu}\n",
                wall,
                (unsigned long long)events,
                (unsigned long long)now_ps,
                m_flows.size(),
                m_done,
                (unsigned long long)marks[0],
                (unsigned long long)drops[0],
                (unsigned long long)marks[1],
                (unsigned long long)drops[1]);
    Simulator::Destroy();
}

void
ConfigureTcp(const std::map<std::string, std::string>& kv)
{
    std::string cc = Need(kv, "cc");
    if (cc != "dctcp" && cc != "newreno")
    {
        Fail("case file: cc must be dctcp or newreno, got '" + cc + "'");
    }
    Config::SetDefault("ns3::TcpL4Protocol::SocketType",
                       TypeIdValue(cc == "dctcp" ? TcpDctcp::GetTypeId()
                                                 : TcpNewReno::GetTypeId()));
    // NewReno loss recovery as fabriclab models it (RFC 5681/6582): no SACK,
    // no limited transmit, classic recovery instead of PRR.
    Config::SetDefault("ns3::TcpL4Protocol::RecoveryType",
                       TypeIdValue(TcpClassicRecovery::GetTypeId()));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(false));
    Config::SetDefault("ns3::TcpSocketBase::LimitedTransmit", BooleanValue(false));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(false));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(NeedU(kv, "mss_bytes")));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(NeedU(kv, "init_cwnd_packets")));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(1));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(8 << 20));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(8 << 20));
    // RTO = max(MinRto, SRTT + max(G, 4 RTTVAR)): a 1 ns clock granularity leaves RFC 6298's rule.
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(PicoSeconds(NeedU(kv, "min_rto_ps"))));
    Config::SetDefault("ns3::TcpSocketBase::ClockGranularity", TimeValue(NanoSeconds(1)));
    Config::SetDefault("ns3::RttEstimator::InitialEstimation",
                       TimeValue(PicoSeconds(NeedU(kv, "initial_rto_ps"))));
    Config::SetDefault("ns3::TcpSocket::ConnTimeout",
                       TimeValue(PicoSeconds(NeedU(kv, "initial_rto_ps"))));
    // fabriclab never gives up on a connection: neither may ns-3.
    Config::SetDefault("ns3::TcpSocket::ConnCount", UintegerValue(20)); // SYN backoff 2^19 x ConnTimeout
    Config::SetDefault("ns3::TcpSocket::DataRetries", UintegerValue(1000));
}

} // namespace

int
main(int argc, char* argv[])
{
    std::string casePath;
    std::string out = "ns3_flows.csv";
    std::string linksOut = "ns3_links.csv";
    CommandLine cmd(__FILE__);
    cmd.AddValue("case", "case file written by benches/ns3/flows.py", casePath);
    cmd.AddValue("out", "per-flow results (CSV)", out);
    cmd.AddValue("links", "per-port counters (CSV)", linksOut);
    cmd.Parse(argc, argv);
    if (casePath.empty())
    {
        std::fprintf(stderr, "error: --case: required (a case file from benches/ns3/flows.py)\n");
        return 2;
    }
    try
    {
        std::map<std::string, std::string> kv = ReadCase(casePath);
        ConfigureTcp(kv);
        Harness h(kv);
        h.Run(out, linksOut);
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 2;
    }
    return 0;
}
