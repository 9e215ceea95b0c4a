"""A Chinese conversation set with evidence-annotated questions, generated from a seed: the fifth shape of the
evidence-recall benchmark (``--dataset chinese``), and ``python -m bench.chinese_chats [--out FILE]`` to read it.

How it is made. Each conversation is two friends chatting over many dated sessions (one of them the user of the
gateway), in one of three styles: terse (one short clause a message), casual (interjections, particles, emoji) or
long (a planted line wrapped in a few sentences of small talk). Sessions are small talk on everyday topics (work,
cooking, travel, pets, films, sport, weather, shopping…) from phrase banks, with planted lines the questions ask
about:

* facts, said once ("我的自行车密码锁的密码是4821，我总是忘记。"), asked in other words ("我的自行车锁密码是多少？"):
  the question shares some of the evidence's words, never its sentence; a few share none (a paraphrase only);
* updates: a fact said early and changed later (a move, a new job); the question asks for the present one, whose
  evidence is the later line (the earlier one is a distractor that shares its words);
* dated events: the same kind of outing on several days at different places; the question names the day as people
  do (昨天, 前天, 三天前, 上周五, 3月5日) and only the day tells which line answers;
* two-hop facts: two lines that answer together ("我表妹叫小雨" … "小雨下个月去成都读研").

Every planted fact also has distractor lines in the small talk that share the question's words but not its answer
("周末骑自行车去了公园"), so matching a word is not enough. Conversations differ in length (15 to 40 sessions of 6 to
26 messages) and style; the questions are asked the day after the last session.

What it cannot tell. It is generated: the small talk repeats its phrase banks, which real chats do not; its
questions are about planted lines only, each of one to two turns, so it says nothing of questions whose answer is
spread over a conversation or needs reasoning; paraphrases are written by hand for a fixed set of facts, so the
share of words a question shares with its evidence is whatever those templates hold. It measures whether the
lexical signal sees Chinese at all (a question sharing a word with its evidence finds it), whether dates in Chinese
are read, and how pages compare with fixed chunks at a budget; it is no measure of a multilingual embedding model's
quality, since its paraphrases are few.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.datasets import Conversation, Dataset, Evidence, Question, Turn  # noqa: E402

SEED = 49
CONVERSATIONS = 12
CATEGORIES = ("single-hop", "paraphrase", "knowledge-update", "temporal", "multi-hop")
STYLES = ("terse", "casual", "long")
NAMES = (("小林", "阿杰"), ("王芳", "小美"), ("陈晨", "老周"), ("刘洋", "婷婷"), ("张伟", "大鹏"), ("李娜", "思思"),
         ("赵磊", "浩子"), ("孙悦", "晓雯"))

# --- small talk: (a line of the user, a friend's reply), by topic --------------------------------------------

TOPICS: dict[str, list[tuple[str, str]]] = {
    "工作": [("今天开了一上午的会，累死了", "开会最耗精力了，下午能歇会儿吗"), ("老板又让我们加班赶项目", "又加班啊，注意身体"),
             ("这个季度的报告终于写完了", "辛苦了，可以好好休息一下"), ("新来的同事挺好相处的", "那太好了，团队氛围很重要"),
             ("明天要给客户做演示，有点紧张", "你准备得那么充分，肯定没问题"), ("我们部门下个月要团建", "去哪儿团建？"),
             ("今天电脑突然死机，文件差点没保存", "记得经常按保存"), ("项目延期了，大家压力都很大", "慢慢来，急也没用")],
    "做饭": [("晚上做了个番茄炒蛋", "家常菜最好吃了"), ("我在学做红烧肉，火候老是掌握不好", "小火慢炖就行"),
             ("周末想试试烤蛋糕", "烤箱温度要注意"), ("今天买的菜特别新鲜", "菜市场还是比超市好"),
             ("我妈教了我一个包饺子的方法", "什么馅的？"), ("最近在减少吃外卖，自己做饭", "自己做健康多了"),
             ("煮面的时候放了个荷包蛋", "简单又好吃"), ("汤炖了三个小时，特别香", "光听着就饿了")],
    "旅行": [("好想出去旅游啊", "等放假一起去吧"), ("我在看去海边的攻略", "海边夏天去最好"),
             ("上次坐高铁去外地，风景很好", "高铁确实方便"), ("机票又涨价了", "可以等等打折"),
             ("想找个安静的小镇住几天", "古镇就挺安静的"), ("我的行李箱轮子坏了", "该换个新的了"),
             ("朋友推荐了一个民宿", "民宿比酒店有意思"), ("旅游最怕下雨", "带把伞就好")],
    "宠物": [("邻居家的狗特别可爱", "你也想养吗"), ("我在考虑要不要养只猫", "养猫要有耐心"),
             ("宠物医院的费用好贵", "是啊，得提前准备"), ("楼下有只流浪猫天天来", "可以喂点吃的"),
             ("看了好多猫咪的视频", "猫咪视频最解压了"), ("狗粮换了个牌子", "换粮要慢慢过渡")],
    "电影": [("昨晚看了一部科幻片，特效很震撼", "叫什么名字？"), ("最近没什么好看的电影", "可以看看老电影"),
             ("周末想去电影院", "记得提前买票"), ("那部纪录片拍得真好", "纪录片我也喜欢"),
             ("追的电视剧大结局了", "结局怎么样？"), ("电影票现在好贵", "工作日便宜点")],
    "运动": [("今天跑了五公里", "厉害，坚持下去"), ("健身房办了张卡", "别办了卡不去啊"),
             ("周末骑自行车去了公园", "骑车挺锻炼的"), ("打羽毛球扭到脚了", "要冰敷一下"),
             ("最近开始练瑜伽", "瑜伽对腰好"), ("游泳馆人太多了", "早上去人少"), ("买了双新跑鞋", "跑鞋很重要")],
    "天气": [("今天好热啊", "多喝水"), ("外面下大雨了", "出门带伞"), ("降温了，记得加衣服", "你也是"),
             ("今天雾霾好严重", "戴好口罩"), ("终于出太阳了", "适合晒被子"), ("风好大，伞都吹坏了", "太惨了")],
    "购物": [("双十一买了好多东西", "又剁手了"), ("网上买的衣服尺码不对", "可以退换"),
             ("超市在打折", "囤点日用品"), ("手机屏幕碎了，想换新的", "现在新款挺多的"),
             ("买了个新台灯", "看书方便多了"), ("快递三天了还没到", "可能路上堵了")],
    "学习": [("我在学英语口语", "每天练一点就有进步"), ("报了个周末的摄影课", "学摄影很有意思"),
             ("看书总是看不进去", "换个安静的地方试试"), ("考试终于考完了", "可以放松一下了"),
             ("在网上学编程", "有问题可以问我"), ("图书馆的座位好难抢", "早点去")],
    "家人": [("我妈最近血压有点高", "要按时吃药"), ("周末回爸妈家吃饭", "替我问叔叔阿姨好"),
             ("我弟弟要高考了", "让他放轻松"), ("奶奶生日要到了", "准备什么礼物？"),
             ("和家里视频了一个小时", "家里都好吧"), ("表哥结婚了", "恭喜恭喜")],
}

# --- planted facts ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    """A fact the user says once (``said``, with ``{}`` for its value), the question that asks for it in other
    words, the values it takes, and distractor lines that share the question's words but not the answer."""

    said: str
    asked: str
    values: tuple[str, ...]
    distractors: tuple[str, ...]
    category: str = "single-hop"


FACTS = (
    Fact("我的自行车密码锁的密码是{}，我总是忘记。", "我的自行车锁密码是多少？", ("4821", "3907", "1156", "6630"),
         ("周末骑自行车去了公园，骑了两个小时", "银行卡的密码又要改了，真麻烦")),
    Fact("我家猫叫{}，今年三岁了，特别黏人。", "我养的那只猫叫什么名字？", ("咪咪", "团子", "橘子", "豆豆"),
         ("楼下那只猫又来要吃的了", "猫粮快吃完了，得再买点")),
    Fact("我对{}过敏，一吃就起疹子。", "我吃什么东西会过敏？", ("花生", "芒果", "虾", "牛奶"),
         ("春天花粉多，好多人过敏", "药店买了点过敏药备着")),
    Fact("我的生日是{}，每年都在家过。", "我哪天过生日？", ("十月八号", "五月二十号", "一月三号", "七月十五号"),
         ("奶奶的生日快到了，要准备礼物", "同事过生日请我们吃了蛋糕")),
    Fact("我车的车牌号是{}，刚上的牌。", "我的车牌号码是什么？", ("京A7K392", "沪C51M08", "粤B2Q667", "浙A9R013"),
         ("停车场的车位越来越难找了", "洗车店排了好长的队")),
    Fact("我血型是{}型，献血的时候才知道的。", "我是什么血型？", ("AB", "O", "A", "B"),
         ("公司组织献血，好多人去了", "体检报告出来了，一切正常")),
    Fact("我最喜欢的作家是{}，他的书我都看过。", "我最爱看谁写的书？", ("余华", "刘慈欣", "金庸", "沈从文"),
         ("图书馆新到了一批书", "这本书我看了一半就看不下去了")),
    Fact("我在{}上的大学，学的是会计。", "我大学是在哪里读的？", ("厦门", "西安", "南京", "长沙"),
         ("我表弟今年考上了大学", "大学同学聚会定在下个月")),
    Fact("我家WiFi密码是{}，下次来直接连。", "来我家的时候网络怎么连？", ("happy2024", "lin88888", "home1234", "sunny777"),
         ("家里网速太慢了，想换个宽带", "路由器好像坏了"), "paraphrase"),
    Fact("我每天早上喝一杯{}，不喝就没精神。", "我早上起来习惯喝什么？", ("黑咖啡", "豆浆", "绿茶", "燕麦奶"),
         ("早上起晚了，差点迟到", "楼下开了家新的早餐店")),
    Fact("我鞋码是{}码，买鞋别买错了。", "我穿多大的鞋？", ("42", "38", "40", "44"),
         ("买了双新跑鞋，很舒服", "商场的鞋在打折")),
    Fact("我家小区的门禁密码是{}，进门要按井号。", "进我们小区大门要按什么号码？", ("2580#", "1379#", "4682#", "9051#"),
         ("小区新装了电梯", "物业费又涨了")),
    Fact("我以前在{}当过两年兵。", "我参过军吗？在哪儿？", ("新疆", "西藏", "海南", "内蒙古"),
         ("看了一部关于军人的电影", "我爷爷年轻时候也当过兵"), "paraphrase"),
    Fact("我手机号的尾号是{}。", "我电话最后四位是多少？", ("6688", "1024", "7359", "2046"),
         ("手机屏幕碎了，想换新的", "手机话费又欠费了")),
    Fact("我怕{}，看到就腿软。", "我最害怕什么？", ("蛇", "高", "狗", "蜘蛛"),
         ("昨晚看了部恐怖片，吓死了", "坐过山车太刺激了")),
    Fact("我的护照号码是{}，订机票的时候要用。", "我护照号是多少？", ("E83920471", "G12837465", "E55102938", "E90021837"),
         ("机票又涨价了", "签证办下来了")),
)


@dataclass(frozen=True)
class Update:
    """A fact said early (``before``) and changed later (``after``); the question asks for the present value."""

    before: str
    after: str
    asked: str
    values: tuple[str, ...]


UPDATES = (
    Update("我住在{}，离公司挺近的。", "我搬家了，现在住到{}去了，通勤多了半小时。", "我现在住在什么地方？",
           ("朝阳区", "海淀区", "浦东", "徐汇区", "天河区", "南山区")),
    Update("我在{}上班，做财务。", "我跳槽了，下周开始去{}上班。", "我现在在哪家公司工作？",
           ("华为", "阿里", "腾讯", "字节", "京东", "美团")),
    Update("我现在开的是一辆{}。", "旧车卖了，新买了一辆{}。", "我现在开什么车？",
           ("比亚迪", "大众", "丰田", "特斯拉", "本田", "吉利")),
    Update("我女朋友叫{}，我们在一起两年了。", "我和{}订婚了，明年结婚。", "我未婚妻叫什么名字？",
           ("小雪", "佳佳", "晓晓", "欣欣", "琳琳", "萌萌")),
)


@dataclass(frozen=True)
class Outing:
    """An outing of one kind on several days at different places: ``said`` tells it on its day; the question
    names the day."""

    said: str
    asked: str
    places: tuple[str, ...]


OUTINGS = (
    Outing("今天去{}吃了火锅，辣得我直冒汗。", "{}我在哪儿吃的火锅？", ("海底捞", "小龙坎", "大龙燚", "蜀大侠", "巴奴")),
    Outing("今天下午去{}逛了逛，人特别多。", "{}下午我去哪里逛了？", ("故宫", "颐和园", "南锣鼓巷", "三里屯", "798艺术区")),
    Outing("刚从{}看完展览回来，很有收获。", "{}我去哪个地方看的展？", ("国家博物馆", "美术馆", "科技馆", "首都博物馆", "中华世纪坛")),
    Outing("今天和同事去{}打了羽毛球。", "{}我在哪儿打的球？", ("体育馆", "奥体中心", "学校操场", "工人体育场", "社区球馆")),
)


@dataclass(frozen=True)
class TwoHop:
    """Two lines that answer together: who someone is, and what they did."""

    first: str
    second: str
    asked: str
    names: tuple[str, ...]
    values: tuple[str, ...]


TWO_HOPS = (
    TwoHop("我表妹叫{}，今年大四。", "{}说她下个月要去{}读研究生了。", "我表妹要去哪个城市读书？",
           ("小雨", "思雨", "悦悦", "可可"), ("成都", "武汉", "杭州", "青岛")),
    TwoHop("我大学室友叫{}，现在是医生。", "{}最近调到{}工作了。", "我大学室友现在在哪家医院？",
           ("老陈", "阿明", "大刘", "小宋"), ("协和医院", "华山医院", "瑞金医院", "湘雅医院")),
    TwoHop("我们组长叫{}，人很好。", "{}家的孩子刚学会{}。", "我们组长的孩子最近学会了什么？",
           ("王姐", "李哥", "张姐", "赵哥"), ("游泳", "骑车", "弹钢琴", "下围棋")),
)

_CASUAL_BEFORE = ("哈哈，", "对了，", "嗯嗯，", "诶，", "话说，", "")
_CASUAL_AFTER = ("😂", "~", "哈哈", "！", "👍", "")
_LONG_AROUND = ("最近一直挺忙的，好久没跟你聊天了。", "今天天气不错，心情也好。", "刚吃完饭，躺着休息一会儿。",
                "说起来你最近怎么样？", "这几天睡得不太好。", "周末终于可以好好休息了。")
_WEEKDAYS = "一二三四五六日"


_COMMENTS = ("我也是这么想的。", "下次有空再细聊。", "你说得对。", "真是的。", "没办法，只能这样了。", "慢慢来吧。",
             "这个我得想想。", "回头再说。", "改天一起吧。", "说实话我也不太清楚。", "还挺有意思的。", "哎，生活就是这样。")


def styled(text: str, style: str, rng: random.Random, planted: bool) -> str:
    """A line as a person of ``style`` writes it (a planted line keeps all it says)."""
    if text[-1] not in "。！？~":
        text += "。"
    if style == "terse":
        return text.rstrip("。").split("，")[0] if not planted and len(text) > 12 and rng.random() < 0.3 else text
    if style == "casual":
        return f"{rng.choice(_CASUAL_BEFORE)}{text}{rng.choice(_CASUAL_AFTER)}" + (rng.choice(_COMMENTS) if rng.random() < 0.3 else "")
    return "".join(rng.sample(_LONG_AROUND, rng.randint(1, 2))) + text + "".join(rng.sample(_COMMENTS, rng.randint(1, 2)))


def day_phrase(day: datetime, asked: datetime) -> str:
    """How a question asked on ``asked`` names ``day``."""
    back = (asked.date() - day.date()).days
    monday = asked.date() - timedelta(days=asked.weekday())
    if back == 2:
        return "前天"
    if 3 <= back <= 6:
        return f"{'三四五六'[back - 3]}天前"
    if monday - timedelta(days=7) <= day.date() < monday:
        return f"上周{_WEEKDAYS[day.weekday()]}"
    return f"{day.month}月{day.day}日"


def conversation(index: int, rng: random.Random) -> Conversation:
    user, friend = NAMES[index % len(NAMES)]
    style = STYLES[index % len(STYLES)]
    sessions_n = rng.randint(20, 45)
    # sessions every 2-6 days going back; the last ones 1-2 days apart, so that recent days can be named
    asked = datetime(2024, 3, 20 + index % 5, 21, 0)
    days: list[datetime] = []
    at = asked - timedelta(days=1)
    for k in range(sessions_n):
        days.append(at.replace(hour=rng.randint(8, 22), minute=rng.randint(0, 59)))
        at -= timedelta(days=rng.randint(1, 2) if k < 10 else rng.randint(2, 6))
    days.reverse()
    planted: dict[int, list[tuple[str, str]]] = {k: [] for k in range(sessions_n)}  # session -> (key, line)
    questions: list[tuple[str, str, list[str]]] = []  # (category, question, evidence keys)

    def plant(session: int, key: str, line: str) -> None:
        planted[session].append((key, line))

    early = max(sessions_n // 3, 1)
    for n, fact in enumerate(rng.sample(FACTS, 8)):
        key = f"fact{n}"
        plant(rng.randrange(0, sessions_n - 1), key, fact.said.format(rng.choice(fact.values)))
        for line in fact.distractors:
            plant(rng.randrange(0, sessions_n), "", line)
        questions.append((fact.category, fact.asked, [key]))
    for n, update in enumerate(rng.sample(UPDATES, 2)):
        old, new = rng.sample(update.values, 2)
        plant(rng.randrange(0, early), f"old{n}", update.before.format(old))
        plant(rng.randrange(early + 1, sessions_n), f"new{n}", update.after.format(new))
        questions.append(("knowledge-update", update.asked, [f"new{n}"]))
    recent = [k for k in range(sessions_n) if 2 <= (asked.date() - days[k].date()).days <= 13]
    for n, outing in enumerate(rng.sample(OUTINGS, 2)):
        chosen = rng.sample(recent, min(3, len(recent)))
        for m, (session, place) in enumerate(zip(chosen, rng.sample(outing.places, len(chosen)))):
            plant(session, f"out{n}.{m}", outing.said.format(place))
        if chosen:
            target = chosen[0]
            questions.append(("temporal", outing.asked.format(day_phrase(days[target], asked)), [f"out{n}.0"]))
    for n, hop in enumerate(rng.sample(TWO_HOPS, 2)):
        name, value = rng.choice(hop.names), rng.choice(hop.values)
        first = rng.randrange(0, sessions_n - 2)
        plant(first, f"hop{n}a", hop.first.format(name))
        plant(rng.randrange(first + 1, sessions_n), f"hop{n}b", hop.second.format(name, value))
        questions.append(("multi-hop", hop.asked, [f"hop{n}a", f"hop{n}b"]))

    sessions: list[tuple[datetime, list[Turn]]] = []
    evidence: dict[str, Evidence] = {}
    keys: dict[str, str] = {}
    position = 0
    for k in range(sessions_n):
        turns: list[Turn] = []
        lines = [(key, line, True) for key, line in planted[k]]
        topics = rng.sample(sorted(TOPICS), rng.randint(2, 4))
        talk = [pair for topic in topics for pair in rng.sample(TOPICS[topic], min(len(TOPICS[topic]), rng.randint(3, 6)))]
        rng.shuffle(talk)
        script: list[tuple[str, str, bool]] = []
        for said, reply in talk[: rng.randint(5, 16)]:
            script += [("", said, True), ("", reply, False)]
        for key, line, mine in lines:  # a planted line is the user's, answered by the friend
            at_ = rng.randrange(0, len(script) // 2 + 1) * 2
            script[at_:at_] = [(key, line, mine), ("", rng.choice(("真的吗？", "记住了", "原来如此", "好的", "哇，不错啊")), False)]
        for key, line, mine in script:
            text = styled(line, style, rng, bool(key))
            turn = Turn(f"S{k + 1}:{len(turns)}", user if mine else friend, "user" if mine else "assistant", text, k, position)
            turns.append(turn)
            position += 1
            if key:
                keys[key] = turn.id
                evidence[turn.id] = Evidence((text,), turn.index)
        sessions.append((days[k], turns))
    qs = [Question(f"zh{index}/q{n}", text, category, tuple(keys[e] for e in ev))
          for n, (category, text, ev) in enumerate(questions) if all(e in keys for e in ev)]
    return Conversation(f"zh{index}", sessions, qs, evidence, asked)


def load_chinese(conversations: int = CONVERSATIONS, seed: int = SEED) -> Dataset:
    """The generated set (the same for the same seed)."""
    rng = random.Random(seed)
    convs = [conversation(i, rng) for i in range(conversations)]
    return Dataset("chinese", "Chinese chats (generated)", convs, CATEGORIES,
                   f"generated by bench/chinese_chats.py (seed {seed}); Chinese words cut by the gateway's segmenter")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the set as JSON here")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    data = load_chinese(seed=args.seed)
    summary = {c.id: {"sessions": len(c.sessions), "messages": len(c.turns), "questions": len(c.questions)}
               for c in data.conversations}
    print(json.dumps(summary, ensure_ascii=False, indent=1))
    if args.out:
        args.out.write_text(json.dumps([{
            "id": c.id, "asked": c.question_time.isoformat(),
            "sessions": [{"date": d.isoformat(), "turns": [[t.id, t.speaker, t.role, t.text] for t in ts]} for d, ts in c.sessions],
            "questions": [[q.id, q.category, q.text, list(q.evidence)] for q in c.questions]} for c in data.conversations],
            ensure_ascii=False, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
